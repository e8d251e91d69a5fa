"""Distributed-mode crawl workers (``settings.distributed``) over one Redis, and entries of the
Redis frontier built by hand."""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING, Any

from tests.support.crawl import ROOT, crawl_command, seeds_args
from testweb.harness import gaps_by_ip, page_counts, pages

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from larbinscrapy.distributed.frontier import RedisFrontier
    from testweb.harness import RunningWeb

WORKER_DELAY = 0.3  # a worker's DOWNLOAD_DELAY unless a test sets its own
TOLERANCE = 0.005  # Redis TIME is read in whole milliseconds
CLUSTER = {"LARBIN_REDIS_CLUSTER": True, "LARBIN_REDIS_SHARDS": 12}  # a worker on a Redis Cluster


def start_worker(
    web: RunningWeb, out: Path, redis_url: str, *args: str, **settings: Any
) -> subprocess.Popen[bytes]:
    """One worker in the background; ``proc.out`` is ``out``, its log ``out/stderr.log``."""
    out.mkdir(parents=True, exist_ok=True)
    # The IP's delay as long as its hosts' (unless a test sets its own): the per-IP gaps the
    # tests check are then WORKER_DELAY for an IP of several hosts too (the test web's alias).
    merged = {
        "REDIS_URL": redis_url,
        "DOWNLOAD_DELAY": WORKER_DELAY,
        "LARBIN_IP_DELAY": WORKER_DELAY,
        "LARBIN_REDIS_LEASE_TIMEOUT": 3,
        "LARBIN_REDIS_IDLE_BEFORE_CLOSE": 1,
        **settings,
    }
    cmd = crawl_command(web, out, *args, settings=merged)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SCRAPY_SETTINGS_MODULE": "settings.distributed"}
    err = open(out / "stderr.log", "w")  # noqa: SIM115 - closed by wait_workers
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=err, stderr=subprocess.STDOUT, env=env)
    proc.err = err  # type: ignore[attr-defined]
    proc.out = out  # type: ignore[attr-defined]
    return proc


def cluster_workers_under_way(
    web: RunningWeb, out: Path, cluster_url: str, n: int = 2, first_pages: int = 30
) -> list[subprocess.Popen[bytes]]:
    """``n`` workers on the Redis Cluster at ``cluster_url`` (logs in ``out/w<i>``), once the
    server has served ``first_pages`` pages (at most 60 s): a crawl under way for a test to
    change the cluster under. The lease timeout is the default's order, not the 3 s of the kill
    tests: a master busy with a failover or a MIGRATE must not get a live worker reaped."""
    procs = [
        start_worker(
            web,
            out / f"w{i}",
            cluster_url,
            *seeds_args(web.seeds),
            **CLUSTER,
            LARBIN_REDIS_LEASE_TIMEOUT=30,
        )
        for i in range(n)
    ]
    deadline = time.monotonic() + 60
    while len(pages(web.read_log(), web.port)) < first_pages and time.monotonic() < deadline:
        time.sleep(0.1)
    return procs


def wait_workers(procs: Iterable[Any], timeout: float = 150) -> None:
    """Wait for every worker; past ``timeout`` kill them all and fail with the log's tail."""
    procs = list(procs)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            tail = (proc.out / "stderr.log").read_text()[-3000:]
            raise AssertionError(f"worker did not finish in {timeout}s:\n{tail}") from None
        finally:
            proc.err.close()


def assert_clean_logs(procs: Iterable[Any]) -> None:
    """No traceback and no deprecation warning in any worker's log."""
    for proc in procs:
        log = (proc.out / "stderr.log").read_text()
        assert "Traceback" not in log, log[-3000:]
        assert "ScrapyDeprecationWarning" not in log, log[-3000:]


def frontier_entry(frontier: RedisFrontier, url: str) -> bytes:
    """The frontier's stored entry of a plain GET of ``url``."""
    host = url.split("/")[2].split(":", maxsplit=1)[0]
    site = "/".join(url.split("/")[:3])
    return frontier.entry(site, host, f'["{url}",0]'.encode())


def fetched_twice(records: list[dict[str, Any]], port: int) -> list[str]:
    """Pages requested more than once, but for server errors (RETRY_TIMES=1 retries them)."""
    ok = [e for e in records if e["status"] < 500]
    return [url for url, n in page_counts(ok, port).items() if n > 1]


def min_interval_per_ip(records: list[dict[str, Any]]) -> dict[str, float]:
    """Per server IP, the shortest time between two requests (robots.txt included)."""
    return {ip: min(gaps, default=99.0) for ip, gaps in gaps_by_ip(records).items()}
