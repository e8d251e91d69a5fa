"""A Redis Cluster stood up from docs/distributed.md alone, then a master killed under a worker.

The block marked ``cluster-one-machine`` in the docs is run as a user would paste it: only its
directory and ports are moved into the test's own (free ports, a temporary directory). The test
then checks what the docs promise: 3 masters and 3 replicas, a password that is required,
append-only files, protected mode; a worker that crawls through the password; and a failover,
with the documented ``cluster-node-timeout``, that ends within the worker's outage limit, the
crawl finishing with nothing lost.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.conf.defaults import LARBIN_REDIS_OUTAGE_TIMEOUT
from tests.support.cluster import REDIS_CLI, cluster_port
from tests.support.crawl import seeds_args
from tests.support.wait import wait_for
from tests.support.workers import assert_clean_logs, start_worker, wait_workers
from testweb.harness import pages

if TYPE_CHECKING:
    from collections.abc import Iterator

DOCS = Path(__file__).resolve().parents[1] / "docs" / "distributed.md"
MARK = "<!-- cluster-one-machine"


def documented_block() -> str:
    """The shell block that follows the ``cluster-one-machine`` mark."""
    text = DOCS.read_text()
    start = text.index("```sh\n", text.index(MARK)) + len("```sh\n")
    return text[start : text.index("\n```", start)]


def documented_node_timeout_ms() -> int:
    return int(re.search(r"^cluster-node-timeout (\d+)$", documented_block(), re.M)[1])


class DocCluster:
    """The nodes the documented block started (daemonized: found by their pid files)."""

    def __init__(self, base: Path, ports: list[int], password: str) -> None:
        self.base, self.ports, self.password = base, ports, password
        self.killed: set[int] = set()  # a killed daemon may linger as a zombie its pid answers
        self.seen = ""  # the last view polled, for the message when a wait fails

    def cli(self, port: int, *args: str, auth: bool = True) -> str:
        cred = ["-a", self.password, "--no-auth-warning"] if auth else []
        try:
            out = subprocess.run(
                [REDIS_CLI, "-p", str(port), *cred, *args],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return ""
        return (out.stdout + out.stderr).decode().strip()

    def pid(self, port: int) -> int:
        return int((self.base / str(port) / "redis.pid").read_text())

    def alive(self) -> list[int]:
        live = []
        for port in (p for p in self.ports if p not in self.killed):
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.pid(port), 0)
                live.append(port)
        return live

    def nodes(self) -> list[list[str]]:
        return [line.split() for line in self.cli(self.alive()[0], "cluster", "nodes").splitlines()]

    def roles(self, port: int) -> tuple[int, int]:
        """(masters, replicas) as the node on ``port`` sees them."""
        flags = [line.split()[2] for line in self.cli(port, "cluster", "nodes").splitlines()]
        return sum("master" in f for f in flags), sum("slave" in f for f in flags)

    def masters(self) -> set[int]:
        """Ports of the masters that serve slots and are not failed."""
        return {
            int(n[1].split(":")[1].split("@")[0])
            for n in self.nodes()
            if "master" in n[2] and "fail" not in n[2] and len(n) > 8
        }

    def healthy(self) -> bool:
        return all("cluster_state:ok" in self.cli(p, "cluster", "info") for p in self.alive())

    def kill(self, port: int) -> None:
        self.killed.add(port)
        os.kill(self.pid(port), signal.SIGKILL)

    def replaced(self, victim: int) -> bool:
        """A replica serves the killed master's slots and every live node says the cluster is ok."""
        nodes = self.cli(self.alive()[0], "cluster", "nodes")
        states = {p: self.cli(p, "cluster", "info").split("\n", 1)[0] for p in self.alive()}
        self.seen = f"{nodes}\n{states}"
        masters = self.masters()
        return victim not in masters and len(masters) == 3 and self.healthy()

    def stop(self) -> None:
        for port in self.ports:
            with contextlib.suppress(OSError, ValueError):
                os.kill(self.pid(port), signal.SIGKILL)


@contextlib.contextmanager
def cluster_from_docs(base: Path) -> Iterator[DocCluster]:
    ports = []
    while len(ports) < 6:
        port = cluster_port()
        if port not in ports:
            ports.append(port)
    script = documented_block()
    script = re.sub(r"^BASE=.*$", f"BASE={base}", script, count=1, flags=re.M)
    script = re.sub(
        r"^PORTS=.*$", f'PORTS="{" ".join(map(str, ports))}"', script, count=1, flags=re.M
    )
    script += "\nprintf '\\nPASS=%s\\n' \"$PASS\""  # the password the block drew
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], capture_output=True, timeout=120, check=False
    )
    password = re.search(r"^PASS=(\w+)$", done.stdout.decode(), re.M)
    cluster = DocCluster(base, ports, password[1] if password else "")
    try:
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        wait_for(cluster.healthy, 60, "cluster_state:ok on every node")
        wait_for(
            lambda: all(cluster.roles(p) == (3, 3) for p in ports),
            60,
            "3 masters and 3 replicas seen by every node",
        )
        # the block's last loop waited for each replica's first sync: a replica without one
        # may not take over (the failover then never comes)
        linked = [
            p for p in ports if "master_link_status:up" in cluster.cli(p, "info", "replication")
        ]
        assert len(linked) == 3, [cluster.cli(p, "info", "replication") for p in ports]
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_cluster_stood_up_from_the_docs_serves_a_worker_and_fails_over_in_time(web, tmp_path):
    node_timeout = documented_node_timeout_ms() / 1000
    limit = float(LARBIN_REDIS_OUTAGE_TIMEOUT)
    # the docs' rule: the worker's outage limit rides out a failover whose first election the
    # other masters refuse (Redis retries it 4 node timeouts later), with room to spare
    assert limit >= 5 * node_timeout + 10, (limit, node_timeout)
    with cluster_from_docs(tmp_path / "redis") as cluster:
        first = cluster.ports[0]
        assert len(cluster.masters()) == 3
        replicas = [n for n in cluster.nodes() if "slave" in n[2]]
        assert len(replicas) == 3
        master_ids = {n[0] for n in cluster.nodes() if "master" in n[2]}
        assert {n[3] for n in replicas} == master_ids  # one replica for each master
        assert "NOAUTH" in cluster.cli(first, "ping", auth=False)  # the password is required
        assert cluster.cli(first, "config", "get", "appendonly").split() == ["appendonly", "yes"]
        assert cluster.cli(first, "config", "get", "appendfsync").split()[-1] == "everysec"
        assert cluster.cli(first, "config", "get", "protected-mode").split()[-1] == "yes"

        url = f"redis://:{cluster.password}@127.0.0.1:{first}/0"
        worker = start_worker(
            web,
            tmp_path / "w",
            url,
            *seeds_args(web.seeds),
            LARBIN_REDIS_CLUSTER=True,
            LARBIN_REDIS_SHARDS=12,
            LARBIN_REDIS_LEASE_TIMEOUT=30,
        )
        deadline = time.monotonic() + 90
        while len(pages(web.read_log(), web.port)) < 30 and time.monotonic() < deadline:
            assert worker.poll() is None, (tmp_path / "w" / "stderr.log").read_text()[-3000:]
            time.sleep(0.1)
        victim = next(p for p in sorted(cluster.masters()) if p != first)
        killed = time.monotonic()
        cluster.kill(victim)
        try:
            wait_for(lambda: cluster.replaced(victim), limit, f"a replica in place of {victim}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the cluster as last seen:\n{cluster.seen}") from None
        took = time.monotonic() - killed
        wait_workers([worker])
    print(f"failover took {took:.1f} s")
    assert took < limit, took
    assert worker.returncode == 0, (tmp_path / "w" / "stderr.log").read_text()[-3000:]
    assert_clean_logs([worker])
    assert pages(web.read_log(), web.port) == web.web.ground_truth(web.seeds, depth=5)
