"""Shared fixtures: the real test web and real ``scrapy crawl larbin`` subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from larbinscrapy.politeness import IpTable
from settings import base
from testweb.harness import RunningWeb, start_web

ROOT = Path(__file__).resolve().parent.parent


def ip_table(delay: float, connections: int = 1, *, clock: Any, **options: Any) -> IpTable:
    """An ``IpTable`` with the default settings of ``settings/base.py``, on a test's clock."""
    kwargs = {
        "max_failures": base.LARBIN_IP_MAX_FAILURES,
        "backoff": base.LARBIN_IP_BACKOFF,
        "max_crawl_delay": base.LARBIN_MAX_CRAWL_DELAY,
        **options,
    }
    return IpTable(delay, connections, clock=clock, **kwargs)


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
        """URLs requested from the server during the run (robots.txt excluded)."""
        return {f"http://{e['host']}:{port}{e['path']}" for e in self.requests
                if e["path"] != "/robots.txt"}

    def fetch_counts(self, port: int) -> Counter[str]:
        return Counter(f"http://{e['host']}:{port}{e['path']}" for e in self.requests
                       if e["path"] != "/robots.txt")


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
