"""Distributed mode: several ``scrapy crawl larbin`` workers over one real ``redis-server``.

The Redis server is started per test on a free loopback port, without persistence, in the
test's temp dir; these tests are never skipped (``make test`` installs redis-server).
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections import Counter

import pytest
import redis

from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.distributed.frontier import RedisFrontier
from larbinscrapy.distributed.seeds import IdleRule, RedisSeeds
from larbinscrapy.frontier import codec
from larbinscrapy.meta import seed_meta
from larbinscrapy.parse.urls import fingerprint_url
from tests.support.cores import CountingStats
from tests.support.crawl import seeds_args
from tests.support.wait import wait_for
from tests.support.workers import (
    TOLERANCE,
    WORKER_DELAY,
    assert_clean_logs,
    fetched_twice,
    frontier_entry,
    min_interval_per_ip,
    start_worker,
    wait_workers,
)
from testweb.harness import pages, sitemap_counts

DELAY = WORKER_DELAY


@pytest.mark.crawl
def test_three_workers_crawl_the_web_once_and_politely(web, tmp_path, redis_url):
    truth = web.web.ground_truth(web.seeds, depth=5)
    client = redis.Redis.from_url(redis_url)
    client.lpush("larbin:start_urls", *web.seeds)  # the scrapy-redis way...
    # ...and on the command line of every worker. No worker is killed here: a lease longer
    # than a loaded machine may hold a worker's heartbeat back (CI once: 7 pages fetched again
    # by the others after a 3 s lease ran out), so every page is fetched once.
    procs = [
        start_worker(
            web,
            tmp_path / f"w{i}",
            redis_url,
            *seeds_args(web.seeds),
            LARBIN_REDIS_LEASE_TIMEOUT=20,
        )
        for i in range(3)
    ]
    wait_workers(procs)
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert_clean_logs(procs)
    records = web.read_log()
    fetched = pages(records, web.port)
    assert set(fetched) == truth
    reaped = [
        json.loads((p.out / "stats.json").read_text()).get("larbin/distributed/reaped_workers")
        for p in procs
    ]
    assert fetched_twice(records, web.port) == [], reaped
    # each site's sitemap read once, by one of the workers (larbinscrapy/distributed/sitemaps.py)
    assert sitemap_counts(records, web.port) == Counter(
        dict.fromkeys(web.web.sitemap_truth(web.seeds, depth=5), 1)
    )
    intervals = min_interval_per_ip(records)
    assert min(intervals.values()) >= DELAY - TOLERANCE, intervals
    # every worker did a share of the work, and the frontier is empty at the end
    items = [len((p.out / "items.jsonl").read_text().splitlines()) for p in procs]
    assert sum(1 for n in items if n) >= 2, items
    counts = client.hgetall("larbin:frontier:count")
    assert int(counts[b"queued"]) == 0 and int(counts[b"leased"]) == 0


@pytest.mark.crawl
def test_kill_one_worker_its_leases_come_back(web, tmp_path, redis_url):
    truth = web.web.ground_truth(web.seeds, depth=5)
    procs = [
        start_worker(web, tmp_path / f"w{i}", redis_url, *seeds_args(web.seeds)) for i in range(3)
    ]
    wait_for(lambda: len(pages(web.read_log(), web.port)) >= 40, 60, "40 pages fetched")
    procs[0].send_signal(signal.SIGKILL)
    wait_workers(procs)
    assert [p.returncode for p in procs[1:]] == [0, 0]
    assert_clean_logs(procs[1:])
    records = web.read_log()
    assert pages(records, web.port) == truth
    assert min(min_interval_per_ip(records).values()) >= DELAY - TOLERANCE
    reaped = sum("Reaped 1 silent worker" in (p.out / "stderr.log").read_text() for p in procs)
    assert reaped >= 1


@pytest.mark.crawl
def test_stop_all_workers_and_resume_from_redis(web, tmp_path, redis_url):
    truth = web.web.ground_truth(web.seeds, depth=5)
    first = [
        start_worker(web, tmp_path / f"a{i}", redis_url, *seeds_args(web.seeds)) for i in range(3)
    ]
    wait_for(lambda: len(pages(web.read_log(), web.port)) >= 50, 60, "50 pages fetched")
    for proc in first:
        proc.send_signal(signal.SIGINT)
    wait_workers(first)
    stopped_at = len(pages(web.read_log(), web.port))
    assert stopped_at < len(truth)
    status = redis.Redis.from_url(redis_url).hgetall("larbin:frontier:count")
    assert int(status[b"queued"]) > 0 and int(status[b"leased"]) == 0
    second = [
        start_worker(web, tmp_path / f"b{i}", redis_url, *seeds_args(web.seeds)) for i in range(3)
    ]
    wait_workers(second)
    assert [p.returncode for p in second] == [0, 0, 0]
    assert_clean_logs(first + second)
    records = web.read_log()
    assert pages(records, web.port) == truth
    assert fetched_twice(records, web.port) == []


# --- the Redis frontier and dupefilter without Scrapy -------------------------------------
@pytest.mark.crawl
def test_frontier_leases_ip_until_release_and_reaps_dead_workers(redis_url):
    server = redis.Redis.from_url(redis_url)
    df = RedisBitmapDupeFilter(server, "t:seen", mode="bloom", capacity=1000)
    f = RedisFrontier(server, "t:frontier", max_per_site=2)
    urls = [f"http://a.test/{i}" for i in range(4)] + ["http://b.test/"]
    entries = [(2, df.positions(fingerprint_url(u)), frontier_entry(f, u)) for u in urls]
    assert f.admit("w1", df.key, 0, entries) == (5, 0)
    assert f.admit("w1", df.key, 0, entries[:1]) == (0, 1)  # seen: not queued twice
    popped = f.pop("w1", 8, 0)
    assert sorted(popped.unresolved) == ["a.test", "b.test"] and not popped.leases
    f.resolved("a.test", "10.0.0.1")
    f.resolved("b.test", "10.0.0.2")
    popped = f.pop("w1", 8, 0)
    assert sorted(ip for _, ip, _ in popped.leases) == ["10.0.0.1", "10.0.0.2"]  # one per IP
    assert not f.pop("w2", 8, 10).leases  # both IPs leased by w1
    f.release("w1", "10.0.0.1", 0.2)
    released = time.monotonic()
    assert not f.pop("w2", 8, 10).leases  # ready only 0.2 s after the release
    second = wait_for(lambda: f.pop("w2", 8, 10).leases, 5, "the released IP ready again")
    assert 0.2 - TOLERANCE <= time.monotonic() - released < 0.5
    assert [ip for _, ip, _ in second] == ["10.0.0.1"]

    # w2 dies: after the timeout its lease goes back, and its IP is free again
    def reaped() -> tuple[int, int] | None:
        counts = f.heartbeat("w1", 0.2, "t:start")
        return None if counts == (0, 0) else counts

    assert wait_for(reaped, 5, "w2 reaped") == (1, 1)
    again = f.pop("w1", 8, 20)
    assert [codec.url_of(r) for _, _, r in again.leases] == [codec.url_of(r) for _, _, r in second]
    # acknowledging the leases empties the frontier's lease count
    f.admit("w1", df.key, 0, [], [lid for lid, _, _ in popped.leases + again.leases])
    assert f.status("t:start")["leased"] == 0


@pytest.mark.crawl
def test_keep_alive_worker_waits_for_new_seeds(web, tmp_path, redis_url):
    """LARBIN_REDIS_KEEP_ALIVE: an empty frontier does not end the worker; a seed pushed later is
    crawled. Without it the same worker closes by itself (the control)."""
    client = redis.Redis.from_url(redis_url)
    first, later = web.url("h03.test"), web.url("h04.test")
    control = start_worker(
        web,
        tmp_path / "control",
        redis_url,
        "-a",
        f"urls={first}",
        DOWNLOAD_DELAY=0,
        LARBIN_DEPTH=0,
    )
    wait_workers([control], timeout=60)
    assert control.returncode == 0  # closed by itself once the frontier stayed empty
    client.flushdb()
    start = len(web.read_log())
    worker = start_worker(
        web,
        tmp_path / "alive",
        redis_url,
        "-a",
        f"urls={first}",
        DOWNLOAD_DELAY=0,
        LARBIN_DEPTH=0,
        LARBIN_REDIS_KEEP_ALIVE=True,
    )
    try:
        wait_for(
            lambda: first in pages(web.read_log()[start:], web.port), 30, "the first seed fetched"
        )
        # the behaviour: 4 s on an empty frontier, past LARBIN_REDIS_IDLE_BEFORE_CLOSE
        time.sleep(4)
        assert worker.poll() is None, "a keep-alive worker closed on an empty frontier"
        client.lpush("larbin:start_urls", later)
        wait_for(
            lambda: later in pages(web.read_log()[start:], web.port),
            30,
            "a seed pushed to Redis later crawled",
        )
        assert worker.poll() is None
    finally:
        worker.send_signal(signal.SIGINT)
        wait_workers([worker], timeout=60)
    assert worker.returncode == 0
    assert_clean_logs([worker])


@pytest.mark.crawl
def test_redis_seeds_follow_the_rule_of_command_line_seeds(web, tmp_path, redis_url):
    """A seed is the user's choice wherever it comes from: checked as a URL, never link-filtered.

    h04.test is outside LARBIN_DOMAINS: as ``-a urls=`` seed and as Redis seed it is crawled
    all the same (test_crawl checks the command-line half); what is not an http(s) URL is
    skipped and counted, in Redis as in a seeds file.
    """
    inside, outside, outside_too = web.url("h03.test"), web.url("h04.test"), web.url("h05.test")
    client = redis.Redis.from_url(redis_url)
    client.lpush(
        "larbin:start_urls",
        outside_too,
        "ftp://h06.test/file",
        "not a url",
        json.dumps({"url": web.url("h07.test"), "meta": {"larbin_priority": 1}}),
    )
    worker = start_worker(
        web,
        tmp_path / "w",
        redis_url,
        "-a",
        f"urls={inside},{outside}",
        DOWNLOAD_DELAY=0,
        LARBIN_DEPTH=0,
        LARBIN_DOMAINS="h03.test",
    )
    wait_workers([worker], timeout=60)
    assert worker.returncode == 0
    assert_clean_logs([worker])
    seeds = [inside, outside, outside_too, web.url("h07.test")]
    assert pages(web.read_log(), web.port) == web.web.ground_truth(seeds, depth=0)
    stats = json.loads((worker.out / "stats.json").read_text())
    assert stats["larbin/seeds/redis"] == 2
    assert stats["larbin/seeds/invalid"] == 2
    log = (worker.out / "stderr.log").read_text()
    assert "Skipping bad seed from larbin:start_urls: scheme must be http or https" in log


# --- seeds and ending, without Redis ------------------------------------------------------------
def test_redis_seed_entries_plain_json_and_bad():
    stats = CountingStats()
    seeds = RedisSeeds("larbin:start_urls", 100, stats)
    plain = seeds.request(" http://a.test/x \n")
    assert plain.url == "http://a.test/x" and plain.meta == seed_meta()
    rich = seeds.request(json.dumps({"url": "https://b.test/", "meta": {"larbin_priority": 1}}))
    assert rich.url == "https://b.test/" and rich.meta == {**seed_meta(), "larbin_priority": 1}
    bad = [
        "ftp://a.test/f",
        "not a url",
        "{broken json",
        json.dumps({"meta": {}}),
        json.dumps({"url": 7}),
        "http://a b.test/",
    ]
    assert [seeds.request(b) for b in bad] == [None] * len(bad)
    assert stats.values["larbin/seeds/invalid"] == len(bad)
    crawled: list[str] = []
    n = seeds.crawl([b"http://a.test/", b"mailto:x@y"], lambda r: crawled.append(r.url), None)
    assert n == 1 and crawled == ["http://a.test/"] and stats.values["larbin/seeds/redis"] == 1


def test_idle_rule_closes_only_after_the_frontier_stayed_empty():
    rule = IdleRule(idle_before_close=1.0)
    empty = {"queued": 0, "leased": 0, "seeds": 0}
    assert rule.may_close({**empty, "leased": 1}, False, 10.0) is False
    assert rule.may_close(empty, False, 10.0) is None  # empty since now
    assert rule.may_close(empty, True, 10.5) is False  # a host still resolving: starts over
    assert rule.may_close(empty, False, 11.0) is None
    assert rule.may_close(empty, False, 11.9) is None
    assert rule.may_close(empty, False, 12.0) is True


@pytest.mark.crawl
def test_a_worker_whose_redis_goes_away_stops_with_one_line(web, tmp_path, redis_url):
    """Redis shut down mid-crawl: the worker ends (exit 1) once the outage has lasted
    LARBIN_REDIS_OUTAGE_TIMEOUT, saying so in one line, not one error line per Redis job.
    Everything stays in Redis: its leases come back to the workers of the next run."""
    client = redis.Redis.from_url(redis_url)
    worker = start_worker(
        web, tmp_path / "w", redis_url, *seeds_args(web.seeds), LARBIN_REDIS_OUTAGE_TIMEOUT=2
    )
    start = len(web.read_log())
    deadline = time.monotonic() + 60
    while len(pages(web.read_log()[start:], web.port)) < 5:
        assert time.monotonic() < deadline, "the worker fetched nothing"
        assert worker.poll() is None, (tmp_path / "w" / "stderr.log").read_text()[-3000:]
        time.sleep(0.2)
    with contextlib.suppress(redis.ConnectionError):  # it closes the connection as it exits
        client.shutdown(nosave=True)
    gone = time.monotonic()
    wait_workers([worker], timeout=45)
    took = time.monotonic() - gone
    log = (tmp_path / "w" / "stderr.log").read_text()
    assert worker.returncode == 1, log[-3000:]
    assert took < 30, took
    assert "Traceback" not in log, log[-3000:]
    stopped = [line for line in log.splitlines() if "larbin: Redis at" in line]
    assert len(stopped) == 1, log[-3000:]
    assert "unreachable for" in stopped[0] and redis_url in stopped[0]
    failed = [line for line in log.splitlines() if " failed: " in line and "Redis" in line]
    assert len(failed) <= 1, failed  # the first failure of the outage, then only counts
    assert "'finish_reason': 'redis_unreachable'" in log
