"""Stop a real crawl of the test web (SIGINT, ``kill -9``, a torn segment), run the same command
again with the same ``JOBDIR``, and check both runs against the server's request log.

The crawls are slowed with ``DOWNLOAD_DELAY`` so they can be stopped mid-way; the moment of the
stop is chosen from the server's log (after N requests), not from a timer, so it does not move
with the machine's load.
"""

from __future__ import annotations

import itertools
import signal
import statistics
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import Crawl, run_crawl, seeds_args
from tests.support.resume import check_resumed, run_until, twice
from testweb.harness import start_web

if TYPE_CHECKING:
    from collections import Counter
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

DELAY = 0.2


def job_settings(tmp_path: Path, **more) -> dict:
    return {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY": DELAY, **more}


def sitemap_reads(web, first: Crawl, second: Crawl) -> Counter[str]:
    """How often each site's /sitemap.xml was asked for over both runs; every site was."""
    reads = first.sitemap_counts(web.port) + second.sitemap_counts(web.port)
    assert set(reads) == web.web.sitemap_truth(web.seeds, depth=5)
    return reads


def test_sigint_then_resume_fetches_nothing_twice(web, tmp_path):
    settings = job_settings(tmp_path)
    first = run_until(web, tmp_path / "run1", settings, after_requests=60, sig=signal.SIGINT)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["finish_reason"] == "shutdown"
    assert "Resuming" not in first.stderr
    second = run_crawl(web, tmp_path / "run2", *seeds_args(web.seeds), settings=settings)
    assert "Resuming" in second.stderr
    counts = check_resumed(web, first, second)
    assert twice(counts) == {}, "fetched twice across the restart (seeds included)"
    assert twice(sitemap_reads(web, first, second)) == {}  # a read site is marked in JOBDIR
    for seed in web.seeds:
        assert seed not in second.fetched(web.port)
    assert (tmp_path / "job").exists()
    assert not (tmp_path / "job" / "frontier").exists()  # empty at the end: files removed


@pytest.mark.parametrize("after_requests", [8, 90, 165], ids=["early", "middle", "late"])
def test_kill9_then_resume_loses_nothing(web, tmp_path, after_requests):
    settings = job_settings(tmp_path)
    first = run_until(web, tmp_path / "run1", settings, after_requests, sig=signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    second = run_crawl(web, tmp_path / "run2", *seeds_args(web.seeds), settings=settings)
    counts = check_resumed(web, first, second)
    # at most one request in flight per IP (one connection per IP, a delay): those come back
    in_flight_bound = len(set(web.resolve.values()))
    assert len(twice(counts)) <= in_flight_bound, twice(counts)
    assert max(counts.values()) <= 2
    # a site whose sitemap read the kill cut short is read again (once), never skipped
    assert max(sitemap_reads(web, first, second).values()) <= 2


def test_torn_segment_is_reported_and_the_crawl_completes(web, tmp_path):
    settings = job_settings(tmp_path)
    first = run_until(web, tmp_path / "run1", settings, after_requests=40, sig=signal.SIGKILL)
    assert first.returncode == -signal.SIGKILL
    segments = sorted(
        (tmp_path / "job" / "frontier").glob("*/*.seg"),
        key=lambda p: (p.stat().st_size > 64, p.stat().st_mtime),
    )
    assert segments, "no segment file to tear"
    torn = segments[-1]
    size = torn.stat().st_size
    assert size > 16 + 8 + 10, "the segment holds no whole record"
    with open(torn, "r+b") as f:
        f.truncate(size - 5)  # inside the payload of its last record
    second = run_crawl(web, tmp_path / "run2", *seeds_args(web.seeds), settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats["finish_reason"] == "finished"
    assert any("WARNING" in line and torn.name in line for line in second.stderr.splitlines())
    assert second.stats.get("larbin/frontier/corrupt_records", 0) >= 1


@pytest.mark.timing  # the big host's gaps at the server, within 10% of its 0.1 s delay
def test_small_hosts_are_not_starved_by_a_big_one(tmp_path):
    delay = 0.1
    with start_web(tmp_path / "web", web="skewed") as web:
        # 600 pages on one host take a minute at this delay: stop once the small hosts are
        # done and the big host has gone on alone for a while.
        big_host = "big.test"
        small_pages = {
            u
            for u in web.web.ground_truth(web.seeds, depth=5)
            if not u.startswith(f"http://{big_host}:")
        }
        crawl = run_until(
            web,
            tmp_path / "out",
            {"DOWNLOAD_DELAY": delay},
            after_requests=len(small_pages) + 80,
            sig=signal.SIGINT,
        )
    log = [e for e in crawl.requests if e["path"] != "/robots.txt"]
    fetched = crawl.fetched(web.port)
    assert small_pages <= fetched, sorted(small_pages - fetched)[:5]
    big = [e["t"] for e in log if e["host"] == big_host]
    small_done = max(e["t"] for e in log if e["host"] != big_host)
    big_before = sum(1 for t in big if t <= small_done)
    # every small host was finished while the big host had done a small part of its 600 pages
    assert big_before <= 100, big_before
    # the big host alone: the engine is woken when its IP cools down, not by the 5 s heartbeat
    gaps = [b - a for a, b in itertools.pairwise(big) if a > small_done]
    assert len(gaps) >= 20
    assert statistics.median(gaps) < 4 * delay, statistics.median(gaps)
    assert min(gaps) >= delay * 0.9  # and the delay is kept at the server
