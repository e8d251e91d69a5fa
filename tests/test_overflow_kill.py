"""``kill -9`` a crawl whose sites overflow their cap, at several moments, then resume (#13).

The "overflow" web queues ~100 URLs per site against a cap of 40, so most URLs go through the
wait FIFOs. Three kills at moments chosen from the server's log, then the same command to the
end; the server's request log judges: nothing lost, and a URL fetched twice only if it was in
flight at a kill or fetched within one checkpoint interval before it.
"""

from __future__ import annotations

import random
import signal
from collections import Counter
from urllib.parse import urlsplit

import pytest

from tests.support.crawl import run_crawl, seeds_args
from tests.support.resume import run_until, twice
from testweb.harness import start_web
from testweb.overflow import DEAD_IPS, OVERFLOW_HOSTS
from testweb.web import build_web

DELAY = 0.15
CHECKPOINT = 1.0
KILLS_AFTER = (120, 250, 250)  # requests logged by the server in each killed run


def recent_requests(requests: list[dict], seconds: float) -> int:
    """Requests logged in the last ``seconds`` of a run."""
    last = max(e["t"] for e in requests)
    return sum(1 for e in requests if e["t"] >= last - seconds)


def test_the_overflow_web_has_every_site_over_the_cap() -> None:
    web = build_web("overflow", 8080)
    truth = web.ground_truth(web.seeds, depth=5)
    by_host = Counter(urlsplit(u).hostname for u in truth)
    assert all(by_host[h] >= 100 for h in OVERFLOW_HOSTS), by_host
    assert {h for h in by_host if h in DEAD_IPS} == set(DEAD_IPS)  # linked, never served
    assert not set(DEAD_IPS) & set(web.hosts.values())
    assert any("?" in u and "&" in u for u in truth)  # query variants
    for seed in range(3):  # the oracle does not depend on the crawl order
        assert web.ground_truth(web.seeds, depth=5, order=random.Random(seed)) == truth


@pytest.fixture
def overflow_web(tmp_path):
    with start_web(tmp_path / "web", web="overflow") as running:
        yield running


def overflow_settings(tmp_path) -> dict:
    return {
        "JOBDIR": str(tmp_path / "job"),
        "DOWNLOAD_DELAY": DELAY,
        "LARBIN_FRONTIER_CHECKPOINT_INTERVAL": CHECKPOINT,
        "LARBIN_FRONTIER_URLS_PER_SITE_MAX": 40,
        "LARBIN_IP_BACKOFF": 0.2,  # the dead addresses are dropped quickly
        "LARBIN_STATS_INTERVAL": 0.5,  # killed runs leave their stats too
    }


def served_truth(web) -> set[str]:
    """The ground truth without the dead addresses (the server never sees those)."""
    return {
        u for u in web.web.ground_truth(web.seeds, depth=5) if urlsplit(u).hostname not in DEAD_IPS
    }


@pytest.mark.crawl
def test_kill9_three_times_with_overflowing_sites(overflow_web, tmp_path):
    web = overflow_web
    settings = overflow_settings(tmp_path)
    runs = []
    for n, after in enumerate(KILLS_AFTER):
        run = run_until(web, tmp_path / f"run{n}", settings, after, sig=signal.SIGKILL)
        assert run.returncode == -signal.SIGKILL
        runs.append(run)
    final = run_crawl(
        web, tmp_path / "final", *seeds_args(web.seeds), settings=settings, timeout=180
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert final.stats["finish_reason"] == "finished"
    runs.append(final)

    truth = served_truth(web)
    fetched = set().union(*(r.fetched(web.port) for r in runs))
    assert truth - fetched == set(), "URLs lost across the kills"
    assert fetched <= truth
    assert final.fetched(web.port) - set().union(*(r.fetched(web.port) for r in runs[:-1]))

    # Two copies of one URL fetched inside one run were both queued on disk: a copy left
    # behind by a move between FIFOs, never a request that was in flight at a kill.
    within = {n: twice(r.fetch_counts(web.port)) for n, r in enumerate(runs)}
    assert all(not d for d in within.values()), {n: len(d) for n, d in within.items()}
    counts = Counter()
    for r in runs:
        counts.update(r.fetch_counts(web.port))
    ips = len(set(web.resolve.values()))
    # per kill: one request in flight per IP, plus what the server saw in the checkpoint
    # interval before the kill (read from its log, so a loaded machine does not move it)
    bound = sum(ips + recent_requests(r.requests, CHECKPOINT) for r in runs[:-1])
    dup = twice(counts)
    assert max(counts.values()) <= len(KILLS_AFTER) + 1
    refetched = sum(n - 1 for n in dup.values())
    assert refetched <= bound, (refetched, bound, sorted(dup)[:10])
    # each site's sitemap is asked for, and again only after a kill cut its read short
    sitemaps = Counter()
    for r in runs:
        sitemaps.update(r.sitemap_counts(web.port))
    assert set(sitemaps) == web.web.sitemap_truth(web.seeds, depth=5)
    assert max(sitemaps.values()) <= len(KILLS_AFTER) + 1
    to_wait = sum(r.stats.get("larbin/frontier/to_wait", 0) for r in runs)
    assert to_wait, "the sites never overflowed: the test would not exercise the wait FIFOs"


@pytest.mark.crawl
def test_sigint_then_resume_with_overflowing_sites_fetches_nothing_twice(overflow_web, tmp_path):
    """A clean stop with most URLs in the overflow FIFOs: they are read back in place."""
    web = overflow_web
    settings = overflow_settings(tmp_path)
    first = run_until(web, tmp_path / "run1", settings, 300, sig=signal.SIGINT)
    assert first.returncode == 0, first.stderr[-3000:]
    second = run_crawl(
        web, tmp_path / "run2", *seeds_args(web.seeds), settings=settings, timeout=180
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Resuming" in second.stderr
    counts = first.fetch_counts(web.port) + second.fetch_counts(web.port)
    assert set(counts) == served_truth(web)
    assert twice(counts) == {}
    sitemaps = first.sitemap_counts(web.port) + second.sitemap_counts(web.port)
    assert sitemaps == Counter(dict.fromkeys(web.web.sitemap_truth(web.seeds, depth=5), 1))
    assert not (tmp_path / "job" / "frontier").exists()  # every FIFO empty and removed
