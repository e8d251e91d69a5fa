"""Parity of the Redis workers with the one-process crawl, across 2 workers on one real
redis-server: what one worker learnt about a site (robots.txt...) the other does not ask again."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import redis

from larbinscrapy.parse.urls import fingerprint_url
from larbinscrapy.revisit.entry import Entry
from larbinscrapy.revisit.redis_store import RedisRevisitStore
from tests.support.cluster import redis_cluster
from tests.support.crawl import seeds_args
from tests.support.revisit import EARLY, RULE, by_page, gaps, revisit_entries_per_master
from tests.support.status import LiveCrawl, fetched_before_a_priority_url, port_range
from tests.support.workers import (
    TOLERANCE,
    WORKER_DELAY,
    assert_clean_logs,
    fetched_twice,
    min_interval_per_ip,
    start_worker,
    wait_workers,
)
from testweb import polite
from testweb.changing import start_changing
from testweb.harness import (
    ROBOTS,
    SITEMAP,
    gaps_by_host,
    gaps_by_ip,
    pages,
    sitemap_counts,
)

REVISIT = {**RULE, "DOWNLOAD_DELAY": 0, "LARBIN_REVISIT_LEASE": 2.0}


def _robots_counts(records: list[dict], port: int) -> Counter[str]:
    return Counter(f"{e['host']}:{port}" for e in records if e["path"] == ROBOTS)


@pytest.mark.crawl
def test_robots_txt_and_sitemaps_read_once_per_site_by_all_workers(web, tmp_path, redis_url):
    truth = web.web.ground_truth(web.seeds, depth=5)
    procs = [
        start_worker(web, tmp_path / f"w{i}", redis_url, *seeds_args(web.seeds)) for i in range(2)
    ]
    wait_workers(procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    records = web.read_log()
    assert pages(records, web.port) == truth
    assert fetched_twice(records, web.port) == []
    robots = _robots_counts(records, web.port)
    sites = {u.split("/")[2] for u in truth}
    assert set(robots) == sites
    assert {s: n for s, n in robots.items() if n != 1} == {}
    assert sitemap_counts(records, web.port) == Counter(
        dict.fromkeys(web.web.sitemap_truth(web.seeds, depth=5), 1)
    )  # a sitemap read once
    assert min(min_interval_per_ip(records).values()) >= WORKER_DELAY - TOLERANCE
    shared = sum("larbin/robots/shared" in (p.out / "stderr.log").read_text() for p in procs)
    assert shared >= 1


@pytest.mark.crawl
def test_a_host_set_aside_by_one_worker_is_not_asked_by_the_other(tmp_path, redis_url):
    # far.test answers every page 429 with a Retry-After past LARBIN_THROTTLE_RETRY_AFTER_MAX: the
    # first worker it answers sets it aside; its other pages (all seeds) are never asked, by either.
    hosts = {
        "far.test": {"ip": "127.0.5.10", "pages": 8, "throttle": 8, "retry_after": "7200"},
        "near.test": {"ip": "127.0.5.10", "pages": 8},
        "calm.test": {"ip": "127.0.5.11", "pages": 12},
    }
    with polite.start(tmp_path / "web", hosts) as web:
        seeds = sorted(web.pages())
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(seeds),
                DOWNLOAD_DELAY=0.2,
                LARBIN_THROTTLE_RETRY_AFTER_MAX=60,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    far = [e for e in log if e["host"] == "far.test" and e["path"] not in (ROBOTS, SITEMAP)]
    assert len(far) == 1, far  # asked once, then left alone by every worker
    ok = {f"http://{e['host']}:{web.port}{e['path']}" for e in log if e["status"] == 200}
    assert ok >= polite.page_urls({h: hosts[h] for h in ("near.test", "calm.test")}, web.port)
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert sum(s.get("larbin/host/set_aside", 0) for s in stats) == 1
    assert sum(s.get("larbin/dropped/throttled", 0) for s in stats) == 8
    assert all(s.get("item_scraped_count", 0) for s in stats), stats


@pytest.mark.crawl
def test_a_priority_url_is_its_sites_next_fetch_in_the_shared_frontier(web, tmp_path, redis_url):
    settings = {"REDIS_URL": redis_url, "DOWNLOAD_DELAY": 1.0, "LARBIN_STATUS_PORT": port_range(10)}
    workers: list[LiveCrawl] = []
    try:
        for name in ("w1", "w2"):
            workers.append(
                LiveCrawl(
                    web,
                    tmp_path / name,
                    settings=settings,
                    env={"SCRAPY_SETTINGS_MODULE": "settings.distributed"},
                )
            )
        before = fetched_before_a_priority_url(web, workers[0])
        # the site's fetch in flight when the URL arrived may come first, nothing else
        assert len(before) <= 1, before
    finally:
        for w in workers:
            w.kill()


@pytest.mark.crawl
def test_the_redis_schedule_forgets_a_gone_page(redis_url):
    store = RedisRevisitStore(redis.Redis.from_url(redis_url), "t:revisit", 10)
    gone, kept = (
        Entry(fingerprint_url(f"http://a.test/{p}"), f"http://a.test/{p}", 100.0, 5.0)
        for p in ("gone", "kept")
    )
    assert store.add(gone) and store.add(kept)
    taken = {e.url: e for e in store.take(200.0, 3600.0)[2]}
    assert store.forget(taken[gone.url])
    assert not store.forget(taken[gone.url])  # a second copy of the same answer
    assert store.done(taken[kept.url], taken[kept.url].evolve(due=300.0))
    server = redis.Redis.from_url(redis_url)
    assert server.hkeys("t:revisit:state") == [kept.fp]  # nothing of the gone page is left
    assert server.zcard("t:revisit:flight") == 0
    assert [e.url for e in store.take(1e12, 3600.0)[2]] == [kept.url]


@pytest.mark.crawl
@pytest.mark.cluster
def test_two_workers_revisit_on_a_cluster(tmp_path):
    with (
        redis_cluster(tmp_path / "cluster") as cluster,
        start_changing(tmp_path / "web", period=3.0) as web,
    ):
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                cluster.url,
                *seeds_args(web.seeds),
                CLOSESPIDER_TIMEOUT=12,
                LARBIN_REDIS_CLUSTER=True,
                **REVISIT,
            )
            for i in range(2)
        ]
        wait_workers(procs, timeout=60)
        log = web.read_log()
        state = sum(revisit_entries_per_master(cluster).values())  # every shard's entries
    assert_clean_logs(procs)
    pages = by_page(log)
    assert len(pages) == 44
    for key, records in pages.items():
        kind = key.split("/")[1] or "never"
        assert all(r["inm"] or r["ims"] for r in records[1:]) or kind == "plain", (key, records)
        if kind in ("never", "lmonly", "plain"):  # one schedule for both: 1, 1, 2, 2 s apart
            got = gaps(records)
            assert len(got) >= 3, (key, got)
            for gap, due in zip(got, [1, 1, 2, 2, 4], strict=False):
                assert gap >= due - EARLY, (key, got)
    assert state == 44  # every page scheduled once, in the cluster
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert all(s.get("larbin/revisit/due", 0) for s in stats), stats  # both workers revisit


@pytest.mark.crawl
def test_hosts_on_one_ip_keep_both_delays_across_workers(tmp_path, redis_url):
    # Virtual hosts in the shared frontier (docs/distributed.md, parity): both limits hold at
    # the server, the host's DOWNLOAD_DELAY and the IP's LARBIN_IP_DELAY, whichever worker
    # fetches (the pace itself: tests/test_distributed_hosts.py).
    hosts: dict[str, dict] = {f"v{i}.test": {"ip": "127.0.5.20", "pages": 3} for i in range(4)}
    hosts["solo.test"] = {"ip": "127.0.5.21", "pages": 6}
    host_delay, ip_delay = 0.6, 0.2
    with polite.start(tmp_path / "web", hosts) as web:
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(web.seeds),
                DOWNLOAD_DELAY=host_delay,
                LARBIN_IP_DELAY=ip_delay,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    ok = {f"http://{e['host']}:{web.port}{e['path']}" for e in log if e["status"] == 200}
    assert ok == web.pages()
    for host, host_gaps in gaps_by_host(log).items():
        assert min(host_gaps) >= host_delay - TOLERANCE, host
    for ip, ip_gaps in gaps_by_ip(log).items():
        assert min(ip_gaps) >= ip_delay - TOLERANCE, ip
