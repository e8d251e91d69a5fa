"""Host-level politeness in the shared frontier, as in the one-process crawl, across 2 workers
on a real redis-server, judged at the test web's server: virtual hosts on one IP crawled at
the IP's pace (each host at its own), and a throttling run without Retry-After counted over
every worker (the back-off doubles across them, the host is set aside after the cap)."""

from __future__ import annotations

import json
import time
from itertools import pairwise
from typing import Any

import pytest
import redis

from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.distributed.frontier import RedisFrontier, Throttle
from larbinscrapy.frontier import codec
from larbinscrapy.parse.urls import fingerprint_url, host_of
from larbinscrapy.politeness.hosts import ANSWERED, BACKOFF, RETRY_AFTER
from tests.support.cluster import redis_cluster
from tests.support.crawl import seeds_args
from tests.support.wait import wait_for
from tests.support.workers import (
    TOLERANCE,
    assert_clean_logs,
    frontier_entry,
    start_worker,
    wait_workers,
)
from testweb import polite
from testweb.harness import ROBOTS, SITEMAP, gaps_by_host, gaps_by_ip

pytestmark = pytest.mark.crawl

SHARED = "127.0.9.40"
HOSTS, PAGES = 10, 3  # per host: robots.txt, /sitemap.xml and 3 pages
HOST_DELAY, IP_DELAY = 1.0, 0.1


def _vhost_crawl(tmp_path, redis_url: str, **settings: Any) -> list[dict[str, Any]]:
    hosts = {f"v{i}.test": {"ip": SHARED, "pages": PAGES} for i in range(HOSTS)}
    with polite.start(tmp_path / "web", hosts) as web:
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(web.seeds),
                DOWNLOAD_DELAY=HOST_DELAY,
                LARBIN_IP_DELAY=IP_DELAY,
                **settings,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
        pages = web.pages()
        port = web.port
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    ok = {f"http://{e['host']}:{port}{e['path']}" for e in log if e["status"] == 200}
    assert ok == pages
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert all(s.get("item_scraped_count", 0) for s in stats), stats  # both workers fetched
    return log


def _assert_ip_pace(log: list[dict[str, Any]]) -> None:
    for host, gaps in gaps_by_host(log).items():
        assert min(gaps) >= HOST_DELAY - TOLERANCE, (host, min(gaps))
    for ip, gaps in gaps_by_ip(log).items():
        assert min(gaps) >= IP_DELAY - TOLERANCE, (ip, min(gaps))
    times = sorted(e["t"] for e in log if e["ip"] == SHARED)
    assert len(times) == HOSTS * (PAGES + 2)
    span = times[-1] - times[0]
    at_host_pace = (len(times) - 1) * HOST_DELAY  # the IP paced by DOWNLOAD_DELAY: 49 s
    # each host needs (PAGES + 1) host delays; at the IP's pace it all fits in ~5-6 s
    print(f"{len(times)} requests on {SHARED} in {span:.2f} s (host pace: {at_host_pace:.0f} s)")
    assert span < at_host_pace / 3, span


def test_vhosts_on_one_ip_are_crawled_at_the_ip_pace_by_two_workers(tmp_path, redis_url):
    _assert_ip_pace(_vhost_crawl(tmp_path, redis_url))


@pytest.mark.cluster
def test_vhosts_on_one_ip_keep_the_ip_pace_on_a_cluster(tmp_path):
    # the hosts of the IP land in different shards: each host's record is in its own shard,
    # the IP's pace is its own lease key
    with redis_cluster(tmp_path / "cluster") as cluster:
        _assert_ip_pace(_vhost_crawl(tmp_path, cluster.url, LARBIN_REDIS_CLUSTER=True))


def test_a_host_is_leased_once_at_a_time_on_an_ip_of_several_connections(tmp_path, redis_url):
    # LARBIN_IP_DELAY 0 and 4 connections per IP: the IP serves 4 hosts at once, but each host
    # one fetch at a time across both workers, DOWNLOAD_DELAY apart
    hosts = {f"c{i}.test": {"ip": "127.0.9.45", "pages": 4} for i in range(4)}
    with polite.start(tmp_path / "web", hosts) as web:
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(web.seeds),
                DOWNLOAD_DELAY=0.5,
                LARBIN_IP_DELAY=0,
                LARBIN_IP_CONNECTIONS=4,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
        ok = {f"http://{e['host']}:{web.port}{e['path']}" for e in log if e["status"] == 200}
        pages = web.pages()
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    assert ok == pages
    for host, gaps in gaps_by_host(log).items():
        assert min(gaps) >= 0.5 - TOLERANCE, (host, sorted(gaps)[:3])


def _throttled_pages(log: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    return [e for e in log if e["host"] == host and e["path"] not in (ROBOTS, SITEMAP)]


def _throttle_crawl(
    tmp_path,
    redis_url: str,
    hosts: dict[str, dict[str, Any]],
    *,
    every_page: bool = False,
    **settings: Any,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], set[str]]:
    """Two workers, sitemaps off: a sitemap's normal answer would end a throttling run in the
    middle. The server's log, each worker's stats, the pages not
    fetched. ``every_page``: every page is a seed (not only each host's root)."""
    with polite.start(tmp_path / "web", hosts) as web:
        seeds = sorted(web.pages()) if every_page else web.seeds
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(seeds),
                DOWNLOAD_DELAY=0.1,
                LARBIN_IP_DELAY=0.1,
                LARBIN_SITEMAPS=False,
                **settings,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
        ok = {f"http://{e['host']}:{web.port}{e['path']}" for e in log if e["status"] == 200}
        pages = web.pages()
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert all(s.get("item_scraped_count", 0) for s in stats), stats
    return log, stats, pages - ok


def test_the_backoff_without_retry_after_doubles_across_two_workers(tmp_path, redis_url):
    _assert_backoff_doubles(tmp_path, redis_url)


@pytest.mark.cluster
def test_the_backoff_doubles_across_two_workers_on_a_cluster(tmp_path):
    # the IP's own lease key is released only with the shared pause the host's shard started
    with redis_cluster(tmp_path / "cluster") as cluster:
        _assert_backoff_doubles(tmp_path, cluster.url, LARBIN_REDIS_CLUSTER=True)


def _assert_backoff_doubles(tmp_path, redis_url: str, **settings: Any) -> None:
    # bo.test answers its first 5 page requests 429 without Retry-After: 0.2, 0.4, 0.8, 1.6 s
    # of back-off (and more after the 5th), whichever worker met the answer before. On a
    # cluster vhost.test shares bo.test's IP from another shard: the pauses hold it too.
    hosts = {
        "bo.test": {"ip": "127.0.9.41", "pages": 4, "throttle": 5},
        "calm.test": {"ip": "127.0.9.42", "pages": 40},
    }
    if settings:
        hosts["vhost.test"] = {"ip": "127.0.9.41", "pages": 6}
    log, stats, missing = _throttle_crawl(
        tmp_path,
        redis_url,
        hosts,
        LARBIN_THROTTLE_BACKOFF=0.2,
        LARBIN_THROTTLE_IN_A_ROW_MAX=10,
        **settings,
    )
    assert missing == set()
    assert sum(s.get("larbin/throttled/429", 0) for s in stats) == 5
    print("429s met by each worker:", [s.get("larbin/throttled/429", 0) for s in stats])
    bo = _throttled_pages(log, "bo.test")
    gaps = [b["t"] - a["t"] for a, b in pairwise(bo)][:5]  # after the 1st ... 5th 429
    assert len(gaps) == 5
    for k, gap in enumerate(gaps):
        assert gap >= 0.2 * 2**k - TOLERANCE, gaps
    # each pause holds the IP too, as locally: nothing reached it during one
    paused = [e["t"] for e in bo if e["status"] == 429]
    for t, pause in zip(paused, [0.2 * 2**k for k in range(5)], strict=True):
        later = [e["t"] - t for e in log if e["ip"] == "127.0.9.41" and e["t"] > t]
        assert min(later) >= pause - TOLERANCE, (pause, later)


def test_a_host_is_set_aside_after_the_cap_of_answers_in_a_row_over_all_workers(
    tmp_path, redis_url
):
    # nag.test answers every page 429 without Retry-After; LARBIN_THROTTLE_IN_A_ROW_MAX 4:
    # 4 answers in all (not 4 per worker), then its pages are left by both workers
    hosts = {
        "nag.test": {"ip": "127.0.9.43", "pages": 12, "throttle": 100},
        "calm.test": {"ip": "127.0.9.44", "pages": 40},
    }
    log, stats, missing = _throttle_crawl(
        tmp_path,
        redis_url,
        hosts,
        every_page=True,
        LARBIN_THROTTLE_BACKOFF=0.1,
        LARBIN_THROTTLE_IN_A_ROW_MAX=4,
    )
    print("429s met by each worker:", [s.get("larbin/throttled/429", 0) for s in stats])
    nag = _throttled_pages(log, "nag.test")
    assert [e["status"] for e in nag] == [429] * 4, nag
    assert {u for u in missing if "//calm.test" in u} == set()
    assert sum(s.get("larbin/throttled/429", 0) for s in stats) == 4
    assert sum(s.get("larbin/host/set_aside", 0) for s in stats) == 1


def test_the_frontier_paces_hosts_apart_from_their_ip_and_shares_the_throttling_run(redis_url):
    server = redis.Redis.from_url(redis_url)
    df = RedisBitmapDupeFilter(server, "h:seen", mode="bloom", capacity=1000)
    f = RedisFrontier(
        server,
        "h:frontier",
        max_per_site=4,
        throttle=Throttle(backoff=0.4, max_backoff=1.0, max_in_a_row=4),
    )
    urls = [f"http://{h}.test/{i}" for h in ("a", "b") for i in range(3)]
    f.admit(
        "w1", df.key, 0, [(2, df.positions(fingerprint_url(u)), frontier_entry(f, u)) for u in urls]
    )
    assert sorted(f.pop("w1", 8, 0).unresolved) == ["a.test", "b.test"]
    for host in ("a.test", "b.test"):
        f.resolved(host, "10.0.0.9")
    ((_, ip, first),) = f.pop("w1", 8, 0).leases  # one connection on the IP
    one = host_of(codec.url_of(first))
    f.release("w1", ip, 0.05, host=one, host_delay=5.0, outcome=ANSWERED)
    # the IP is ready after its own delay, for the other host only
    ((_, _, second),) = wait_for(lambda: f.pop("w2", 8, 10).leases, 2, "the other host")
    two = host_of(codec.url_of(second))
    assert two != one
    f.release("w2", ip, 0.05, host=two, host_delay=5.0, outcome=ANSWERED)
    time.sleep(0.1)
    popped = f.pop("w1", 8, 20)  # the IP is ready, both hosts cool: when the first is
    assert not popped.leases and popped.wait is not None and 4.5 < popped.wait <= 5.0
    # a throttling run without Retry-After, answered to two workers: one run, one back-off
    assert f.release("w1", ip, 0, host=one, outcome=BACKOFF).pause == 0.4
    assert f.release("w2", ip, 0, host=one, outcome=BACKOFF).pause == 0.8
    assert f.release("w1", ip, 0, host=one, outcome=BACKOFF).pause == 1.0  # the max
    f.release("w2", ip, 0, host=one, outcome=ANSWERED)  # a normal answer ends the run
    assert f.release("w2", ip, 0, host=one, outcome=BACKOFF).pause == 0.4
    assert f.release("w1", ip, 0, host=one, outcome=RETRY_AFTER).aside == -1
    assert f.release("w2", ip, 0, host=one, outcome=BACKOFF).pause == 0.8
    aside = f.release("w1", ip, 0, host=one, outcome=BACKOFF)  # the 4th in a row
    assert aside.pause == 0 and aside.aside == 2  # its 2 loaded records dropped
    assert f.release("w2", ip, 0, host=one, outcome=BACKOFF).aside == -1  # set aside once


def test_an_ip_of_one_host_is_ready_when_its_host_is(redis_url):
    # the release says so at once: no pop has to find out that the host still cools
    server = redis.Redis.from_url(redis_url)
    df = RedisBitmapDupeFilter(server, "o:seen", mode="bloom", capacity=1000)
    f = RedisFrontier(server, "o:frontier", max_per_site=4)
    urls = [f"http://c.test/{i}" for i in range(2)]
    f.admit(
        "w1", df.key, 0, [(2, df.positions(fingerprint_url(u)), frontier_entry(f, u)) for u in urls]
    )
    assert f.pop("w1", 8, 0).unresolved == ["c.test"]
    f.resolved("c.test", "10.0.0.10")
    ((_, ip, _),) = f.pop("w1", 8, 0).leases
    f.release("w1", ip, 0.05, host="c.test", host_delay=3.0, outcome=ANSWERED)
    popped = f.pop("w2", 8, 10)
    assert not popped.leases and popped.wait is not None and 2.5 < popped.wait <= 3.0
    assert server.zscore("o:frontier:ready", ip) > int(server.hget("o:frontier:readyat", ip))
