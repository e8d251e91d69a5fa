"""Shared fixtures and helpers: the test web, a real redis-server, ``scrapy crawl larbin`` runs.

Importing this module installs Scrapy's asyncio reactor in the test process (Scrapy 2.19's
``get_crawler`` needs one), once for every test module.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from scrapy.utils.reactor import install_reactor, is_reactor_installed

from larbinscrapy.politeness.hosts import HostTable
from larbinscrapy.politeness.ipsites import IpTable
from settings import base
from testweb.harness import (
    RunningWeb,
    free_port,
    page_counts,
    pages,
    sitemap_counts,
    start_web,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"

if not is_reactor_installed():
    install_reactor(ASYNCIO_REACTOR)


# Every LARBIN_* setting at its default: what a component built from a bare crawler reads.
LARBIN_DEFAULTS = {k: v for k, v in vars(base).items() if k.startswith("LARBIN_")}


def settings_of(module: Any, **overrides: Any) -> dict[str, Any]:
    """A settings profile (``settings.base``, ``settings.distributed``) as a dict, overridden."""
    return {**{k: v for k, v in vars(module).items() if k.isupper()}, **overrides}


def seeds_args(urls: list[str]) -> list[str]:
    """The spider arguments that crawl ``urls`` as seeds."""
    return ["-a", "urls=" + ",".join(urls)]


class ManualClock:
    """A clock the test sets: ``clock()`` is ``clock.now``, for the cores that take a callable."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingStats:
    """The part of Scrapy's stats collector that pure cores use: counters only."""

    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


def host_table(delay: float, *, clock: Any, **options: Any) -> HostTable:
    """A ``HostTable`` (``DOWNLOAD_DELAY`` = ``delay``), defaults of ``settings/base.py``."""
    kwargs = {
        "max_crawl_delay": base.LARBIN_MAX_CRAWL_DELAY,
        "max_retry_after": base.LARBIN_MAX_RETRY_AFTER,
        "throttle_backoff": base.LARBIN_THROTTLE_BACKOFF,
        "max_backoff": base.LARBIN_THROTTLE_MAX_BACKOFF,
        "max_in_a_row": base.LARBIN_THROTTLE_MAX_IN_A_ROW,
        **options,
    }
    return HostTable(delay, clock=clock, **kwargs)


def ip_table(delay: float, connections: int = 1, *, clock: Any, host_delay: float = 0.0,
             **options: Any) -> IpTable:
    """An ``IpTable`` (``LARBIN_IP_DELAY`` = ``delay``) with the defaults of ``settings/base.py``.

    Options of the host level (``max_crawl_delay``...) go to its ``HostTable``.
    """
    host_keys = {"max_crawl_delay", "max_retry_after", "throttle_backoff", "max_backoff",
                 "max_in_a_row", "rng"}
    host_options = {k: options.pop(k) for k in list(options) if k in host_keys}
    kwargs = {
        "max_failures": base.LARBIN_IP_MAX_FAILURES,
        "backoff": base.LARBIN_IP_BACKOFF,
        **options,
    }
    hosts = host_table(host_delay, clock=clock, **host_options)
    return IpTable(delay, connections, clock=clock, hosts=hosts, **kwargs)


@pytest.fixture
def web(tmp_path: Path) -> RunningWeb:
    """The default test web (about 200 pages on 10 loopback IPs), fresh request log."""
    with start_web(tmp_path / "web") as running:
        yield running


@dataclass
class Crawl:
    """What a finished ``scrapy crawl larbin`` run left behind."""

    returncode: int
    stderr: str
    items: list[dict[str, Any]]
    stats: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)  # the web's log for this run

    def fetched(self, port: int) -> set[str]:
        """URLs requested from the server during the run (robots.txt, /sitemap.xml set apart)."""
        return pages(self.requests, port)

    def fetch_counts(self, port: int) -> Counter[str]:
        return page_counts(self.requests, port)

    def sitemap_counts(self, port: int) -> Counter[str]:
        """How often each site's /sitemap.xml was requested during the run."""
        return sitemap_counts(self.requests, port)


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A real ``redis-server`` on a free loopback port, no persistence; yields its URL."""
    import redis

    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A fresh redis-server for one test."""
    with redis_server(tmp_path / "redis") as url:
        yield url


def crawl_command(web: RunningWeb, out: Path, *args: str,
                  settings: dict[str, Any] | None = None) -> list[str]:
    """The command line of a crawl of ``web``; ``args`` are extra ``-a``/``-s`` words."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin",
           "-s", "LARBIN_RESOLVE=" + json.dumps(web.resolve),
           "-s", "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
           "-s", f"LARBIN_STATS_FILE={out / 'stats.json'}",
           "-s", "LOG_LEVEL=INFO",
           "-o", str(out / "items.jsonl")]
    merged = {"DOWNLOAD_DELAY": 0, **(settings or {})}
    for key, value in merged.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd + list(args)


def run_crawl(web: RunningWeb, out: Path, *args: str, settings: dict[str, Any] | None = None,
              timeout: float = 120, stop_after: float | None = None,
              stop_signal: int = signal.SIGINT) -> Crawl:
    """Run a crawl to the end (or stop it with ``stop_signal`` after ``stop_after`` seconds)."""
    out.mkdir(parents=True, exist_ok=True)
    log_start = len(web.read_log())
    cmd = crawl_command(web, out, *args, settings=settings)
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=err, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            if stop_after is not None:
                time.sleep(stop_after)
                proc.send_signal(stop_signal)
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"crawl did not finish in {timeout}s:\n"
                                 + (out / "stderr.log").read_text()[-3000:]) from None
    stderr = (out / "stderr.log").read_text()
    items_path = out / "items.jsonl"
    items = ([json.loads(line) for line in items_path.read_text().splitlines() if line.strip()]
             if items_path.exists() else [])
    stats_path = out / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    return Crawl(proc.returncode, stderr, items, stats, web.read_log()[log_start:])


def clean_copy(dest: Path) -> Path:
    """The files a fresh clone of the working tree holds: tracked plus untracked-not-ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # for `git check-ignore` only
    return dest
