"""Start ``python -m testweb`` in a subprocess for a test or a benchmark, and read its log.

with start_web(tmp_path) as running:
    crawl(running.seeds, LARBIN_RESOLVE=running.resolve)
    assert {r["path"] for r in running.read_log()} ...
    assert fetched == running.web.ground_truth(running.seeds)
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testweb.hostile import HostileWeb, build_hostile
from testweb.web import Web, build_web

if TYPE_CHECKING:
    from collections.abc import Iterable

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT = 15.0
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a server that cannot bind port 0 itself)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- reading the request log ---------------------------------------------------------------------
ROBOTS = "/robots.txt"
SITEMAP = "/sitemap.xml"  # what a crawler asks a site for when its robots.txt names no sitemap
SITE_FILES = (ROBOTS, SITEMAP)  # per-site requests that are not pages (the test webs serve none)


def _url(entry: dict[str, Any], port: int) -> str:
    return f"http://{entry['host']}:{port}{entry['path']}"


def page_counts(records: Iterable[dict[str, Any]], port: int) -> Counter[str]:
    """How often each page URL was requested (robots.txt and /sitemap.xml set apart)."""
    return Counter(_url(e, port) for e in records if e["path"] not in SITE_FILES)


def pages(records: Iterable[dict[str, Any]], port: int) -> set[str]:
    """The page URLs requested (robots.txt and /sitemap.xml set apart)."""
    return set(page_counts(records, port))


def sitemap_counts(records: Iterable[dict[str, Any]], port: int) -> Counter[str]:
    """How often each site's /sitemap.xml was requested (compare with ``Web.sitemap_truth``)."""
    return Counter(_url(e, port) for e in records if e["path"] == SITEMAP)


def gaps_by_ip(records: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Per server IP, the intervals between consecutive request arrivals (every request counted)."""
    return _gaps_by(records, "ip")


def gaps_by_host(records: Iterable[dict[str, Any]]) -> dict[str, list[float]]:
    """Per hostname, the intervals between consecutive request arrivals (every request counted)."""
    return _gaps_by(records, "host")


def _gaps_by(records: Iterable[dict[str, Any]], key: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for entry in records:
        times[entry[key]].append(entry["t"])
    return {k: [b - a for a, b in pairwise(sorted(ts))] for k, ts in times.items()}


class WebStartError(RuntimeError):
    """The server did not start; the message holds its stderr."""


class RunningWeb:
    """A running test-web server: where it listens, its model, its request log."""

    def __init__(
        self, proc: subprocess.Popen[bytes], info: dict[str, Any], web_name: str, stderr_path: Path
    ) -> None:
        self.proc = proc
        self.port: int = info["port"]
        self.hosts: dict[str, str] = info["hosts"]
        self.seeds: list[str] = info["seeds"]
        self.log_path = Path(info["log"])
        self.web: Web | HostileWeb = (
            build_hostile(self.port, bombs=False)
            if web_name == "hostile"
            else build_web(web_name, self.port)
        )
        self.stderr_path = stderr_path

    @property
    def resolve(self) -> dict[str, str]:
        """Hostname -> IP, for ``LARBIN_RESOLVE``."""
        return dict(self.hosts)

    def url(self, host: str, path: str = "/") -> str:
        return self.web.url(host, path)

    def read_log(self) -> list[dict[str, Any]]:
        """Every logged request so far (a line still being written is left out)."""
        if not self.log_path.exists():
            return []
        records = []
        for line in self.log_path.read_text(encoding="utf-8").splitlines(keepends=True):
            if line.endswith("\n"):
                records.append(json.loads(line))
        return records

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit within 5 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> RunningWeb:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_web(
    tmp_path: str | os.PathLike[str],
    web: str = "default",
    slow_delay: float = 1.5,
    port: int = 0,
    *,
    own_session: bool = False,
) -> RunningWeb:
    """Start the server with its log and info files in ``tmp_path``; wait until it listens.

    ``own_session``: a Ctrl-C in the terminal does not reach it (``make demo`` stops it once
    the crawl it serves has closed).
    """
    proc, info, stderr_path = launch(
        tmp_path,
        ["testweb", "--web", web, "--slow-delay", str(slow_delay)],
        port,
        own_session=own_session,
    )
    return RunningWeb(proc, info, web, stderr_path)


def launch(
    tmp_path: str | os.PathLike[str],
    module_args: list[str],
    port: int = 0,
    *,
    own_session: bool = False,
    prefix: list[str] | None = None,
) -> tuple[subprocess.Popen[bytes], dict[str, Any], Path]:
    """Run ``python -m <module_args>`` with ``--port/--log/--info`` in ``tmp_path``; wait for it.
    ``prefix`` runs it through another command (``ip netns exec NAME``: inside a namespace)."""
    tmp = Path(tmp_path)
    tmp.mkdir(parents=True, exist_ok=True)
    info_path, log_path, stderr_path = (
        tmp / "testweb-info.json",
        tmp / "testweb-log.jsonl",
        tmp / "testweb.err",
    )
    info_path.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH")) if p)
    cmd = [
        *(prefix or []),
        sys.executable,
        "-m",
        *module_args,
        "--port",
        str(port),
        "--log",
        str(log_path),
        "--info",
        str(info_path),
    ]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=own_session
        )
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not info_path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            stderr = stderr_path.read_text(errors="replace")
            raise WebStartError(f"testweb did not start (exit {proc.returncode}):\n{stderr}")
        time.sleep(0.02)
    return proc, json.loads(info_path.read_text(encoding="utf-8")), stderr_path


def run_with_peak_rss(
    cmd: list[str],
    log_path: Path,
    timeout: float,
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str],
) -> tuple[int, float]:
    """Run ``cmd`` to its end: (exit code, its own peak RSS in MB); exit code -9 on timeout.

    The command is started by ``testweb.peakrss`` so that its ``ru_maxrss`` does not count the
    test process it would otherwise be forked from.
    """
    result = log_path.with_name(log_path.name + ".rss.json")
    result.unlink(missing_ok=True)
    launcher = [sys.executable, "-m", "testweb.peakrss", str(result), "--", *cmd]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            launcher, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return -9, 0.0
    data = json.loads(result.read_text(encoding="utf-8"))
    return int(data["returncode"]), data["peak_kib"] / 1024  # KiB on Linux
