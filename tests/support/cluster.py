"""A real 3-master Redis Cluster on loopback for tests: ``redis_cluster(workdir)``.

Three ``redis-server --cluster-enabled yes`` processes on free ports, joined by
``redis-cli --cluster create ... --cluster-yes`` (slots split in three ranges), no persistence
unless asked; ``replicas=1`` adds a replica per master (``--cluster-replicas 1``). Yields a
``RedisClusterProcess``: its node URLs, a client, which master holds a key, and ``restart(i)``
/ ``reshard`` / ``kill(i)`` + ``wait_failover`` for the fault and growth tests.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


@dataclass
class RedisClusterProcess:
    """The running cluster's nodes (see the module docstring)."""

    workdir: Path
    ports: list[int]
    appendonly: bool = False
    replicas: int = 0  # per master
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def start_node(self, i: int) -> None:
        d = self.workdir / f"n{i}"
        d.mkdir(parents=True, exist_ok=True)
        port = self.ports[i]
        cmd = [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            f"nodes-{port}.conf",
            "--cluster-node-timeout",
            "5000",
            "--dir",
            str(d),
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        if i < len(self.procs):
            self.procs[i] = proc
        else:
            self.procs.append(proc)
        _wait(lambda: _cli(port, "ping") == "PONG", f"redis-server on {port}")

    def create(self) -> None:
        for i in range(len(self.ports)):
            self.start_node(i)
        nodes = [f"127.0.0.1:{p}" for p in self.ports]
        subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *nodes,
                "--cluster-yes",
                "--cluster-replicas",
                str(self.replicas),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        _wait(self.healthy, "the cluster's state ok")
        if self.replicas:
            _wait(
                lambda: all(
                    "master_link_status:up" in _cli(p, "info", "replication")
                    for p in self.ports
                    if p not in self.masters()
                ),
                "the replicas in sync",
            )

    def alive(self) -> list[int]:
        """Ports of the nodes not killed."""
        return [p for p, proc in zip(self.ports, self.procs, strict=True) if proc.poll() is None]

    def healthy(self) -> bool:
        return all("cluster_state:ok" in _cli(p, "cluster", "info") for p in self.alive())

    def masters(self) -> set[int]:
        """Ports of the nodes serving slots now."""
        return set(self.master_of_slot().values())

    def client(self) -> Any:
        from larbinscrapy.distributed.connection import cluster_client

        return cluster_client(self.url)  # as a worker's

    def master_of_slot(self) -> dict[int, int]:
        """slot -> port of the master serving it."""
        from redis.cluster import RedisCluster

        c = RedisCluster.from_url(f"redis://127.0.0.1:{self.alive()[0]}/0")
        try:
            out: dict[int, int] = {}
            for (low, high), info in c.cluster_slots().items():
                for slot in range(low, high + 1):
                    out[slot] = int(info["primary"][1])
            return out
        finally:
            c.close()

    def keys_per_master(self) -> dict[int, int]:
        """How many keys each master holds (``DBSIZE``)."""
        return {p: int(_cli(p, "dbsize")) for p in sorted(self.masters())}

    def kill(self, i: int) -> None:
        proc = self.procs[i]
        proc.kill()
        proc.wait(timeout=10)

    def wait_failover(self, port: int, timeout: float = 60.0) -> None:
        """Wait until a replica took over the slots of the killed master on ``port``."""
        _wait(
            lambda: self.healthy() and port not in self.masters(),
            f"a replica promoted in place of {port}",
            timeout,
        )

    def restart(self, i: int) -> None:
        """Stop master ``i`` (SIGTERM: its append-only file is flushed) and start it again."""
        proc = self.procs[i]
        proc.terminate()
        proc.wait(timeout=30)
        self.start_node(i)
        _wait(self.healthy, "the cluster's state ok after a restart")

    def reshard(self, source: int, target: int, slots: int) -> None:
        """Move ``slots`` slots from master ``source`` to master ``target`` (``--cluster
        reshard``: clients follow MOVED/ASK; each slot's keys move in one MIGRATE, as
        docs/distributed.md asks)."""
        ids = {p: _cli(p, "cluster", "myid") for p in self.ports}
        subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "reshard",
                f"127.0.0.1:{self.ports[0]}",
                "--cluster-from",
                ids[self.ports[source]],
                "--cluster-to",
                ids[self.ports[target]],
                "--cluster-slots",
                str(slots),
                "--cluster-yes",
                "--cluster-pipeline",
                "1000000",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def cluster_port() -> int:
    """A free loopback port whose cluster bus port (+10000) is free too."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port + 10000 > 65535:
            port = random.randrange(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port


def _cli(port: int, *args: str) -> str:
    try:
        out = subprocess.run(
            [REDIS_CLI, "-p", str(port), *args], capture_output=True, timeout=10, check=False
        )
    except subprocess.TimeoutExpired:
        return ""
    return out.stdout.decode().strip()


def _wait(ok: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def redis_cluster(
    workdir: Path, masters: int = 3, appendonly: bool = False, replicas: int = 0
) -> Iterator[RedisClusterProcess]:
    """A fresh cluster of ``masters`` masters, each with ``replicas`` replicas, for one test."""
    ports = [cluster_port() for _ in range(masters * (1 + replicas))]
    cluster = RedisClusterProcess(workdir, ports, appendonly, replicas)
    try:
        cluster.create()
        yield cluster
    finally:
        cluster.stop()
