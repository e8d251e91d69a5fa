"""Revisits in distributed mode: two workers, one real ``redis-server``, the changing web.

The schedule is Redis's (``RedisRevisitStore``): both workers revisit pages the other fetched,
every page keeps one schedule (never-changing pages are fetched on the rule's times, not twice
as often), and a worker killed with ``kill -9`` loses nothing: the due pages it held come back
to the other worker after ``LARBIN_REVISIT_LEASE``.
"""

from __future__ import annotations

import json
import signal
import time
from typing import TYPE_CHECKING

import pytest
import redis

from tests.support.crawl import run_crawl, seeds_args
from tests.support.revisit import EARLY, RULE, by_page, gaps
from tests.support.workers import start_worker, wait_workers
from testweb.changing import start_changing

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

SETTINGS = {**RULE, "DOWNLOAD_DELAY": 0, "LARBIN_REVISIT_LEASE": 2.0}


def test_two_workers_share_one_schedule_and_survive_a_kill(tmp_path: Path, redis_url):
    with start_changing(tmp_path / "web", period=3.0) as web:
        seeds = seeds_args(web.seeds)
        a = start_worker(
            web,
            tmp_path / "a",
            redis_url,
            *seeds,
            CLOSESPIDER_TIMEOUT=14,
            USER_AGENT="a/1",
            **SETTINGS,
        )
        b = start_worker(
            web,
            tmp_path / "b",
            redis_url,
            *seeds,
            CLOSESPIDER_TIMEOUT=6,
            USER_AGENT=KILLED,
            **SETTINGS,
        )
        time.sleep(5)
        b.send_signal(signal.SIGKILL)  # before its CLOSESPIDER_TIMEOUT: holding due pages
        killed = time.time()
        wait_workers([a, b], timeout=60)
        log = web.read_log()
    pages = by_page(log)
    assert len(pages) == 44
    for key, records in pages.items():
        kind = key.split("/")[1] or "never"
        assert all(r["inm"] or r["ims"] for r in records[1:]) or kind == "plain", (key, records)
        if kind in ("never", "lmonly", "plain"):  # one schedule: 1, 1, 2, 2, 4 s apart
            assert any(_on_schedule(kept) for kept in _schedules(records)), (key, records)
        # after the kill (and a lease), the survivor still revisits every page
        assert max(r["t"] for r in records) > killed + 3, (key, records)
    state = redis.Redis.from_url(redis_url)
    assert state.hlen("larbin:revisit:state") == 44  # every page scheduled once
    assert state.zcard("larbin:revisit:due") + state.zcard("larbin:revisit:flight") == 44
    logs = [(tmp_path / w / "stderr.log").read_text() for w in ("a", "b")]
    assert "Traceback" not in logs[0], logs[0][-3000:]
    assert "larbin/revisit/due" in logs[0]


SCHEDULE = (1, 1, 2, 2, 4)
KILLED = "b/1"  # the killed worker's User-Agent, which the web logs


def _on_schedule(records: list[dict]) -> bool:
    """Whether ``records`` are at least the schedule's steps apart (four steps at least)."""
    got = gaps(records)
    return len(got) >= 4 and all(
        gap >= due - EARLY for gap, due in zip(got, SCHEDULE, strict=False)
    )


def _schedules(records: list[dict]) -> list[list[dict]]:
    """The fetches of one page that may make its schedule: all of them, or all but the killed
    worker's last if the survivor fetched the page after it.

    The killed worker may have fetched a page and died before reporting it (at least once, as the
    module says): the schedule then goes on from the fetch before, and the survivor fetches the
    page again once the lease ends. That fetch counts nowhere; any other early fetch still fails.
    """
    mine = [i for i, r in enumerate(records) if r["ua"] == KILLED]
    if not mine or mine[-1] == len(records) - 1:
        return [records]
    return [records, records[: mine[-1]] + records[mine[-1] + 1 :]]


def test_redis_store_schedules_once_applies_a_fetch_once_and_leases(redis_url):
    from larbinscrapy.parse.urls import fingerprint_url
    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.redis_store import RedisRevisitStore

    server = redis.Redis.from_url(redis_url)
    store = RedisRevisitStore(server, "t:revisit", inflight=3)
    pages = [
        Entry(fingerprint_url(f"http://a.test/{i}"), f"http://a.test/{i}", 100.0 + i, 10.0)
        for i in range(5)
    ]
    assert all(store.add(p) for p in pages)
    assert not store.add(pages[0].evolve(due=1.0))  # a second worker's first fetch: ignored
    assert store.take(99.0, lease=60) == (0, 5, [])  # nothing due yet
    expired, total, taken = store.take(110.0, lease=60)
    assert (expired, total, len(taken)) == (0, 5, 3)  # at most 3 in flight
    first = taken[0]
    new = first.evolve(due=500.0, fetch_count=2)
    assert store.done(first, new)
    assert not store.done(first, first.evolve(due=1.0, fetch_count=2))  # the second copy
    assert Entry.unpack(server.hget("t:revisit:state", first.fp)) == new
    expired, _, taken2 = store.take(111.0, lease=60)
    assert expired == 0 and len(taken2) == 1  # room for one more (two left in flight)
    expired, _, again = store.take(200.0, lease=60)  # the two in flight were never done
    assert expired == 3 and {e.fp for e in again} >= {e.fp for e in taken[1:]}
    assert store.count() == 5


@pytest.mark.parametrize("frontier", ["local", "redis"])
def test_a_due_page_held_past_its_lease_is_fetched_once(tmp_path: Path, request, frontier):
    """A due page that waits in the frontier longer than ``LARBIN_REVISIT_LEASE`` is handed out
    again (the frontier might have lost it); of the two copies, the one that comes second is
    dropped before it reaches the server, on a shared schedule as on a local one. (A killed
    worker's due page comes back twice the same way: from the frontier and from the lease.)"""
    slow = {**RULE, "DOWNLOAD_DELAY": 0.5, "LARBIN_IP_DELAY": 0.5, "LARBIN_REVISIT_LEASE": 1.0}
    with start_changing(tmp_path / "web", period=3.0, hosts=1) as web:
        seeds = seeds_args(web.seeds)
        if frontier == "redis":
            url = request.getfixturevalue("redis_url")
            proc = start_worker(web, tmp_path / "w", url, *seeds, CLOSESPIDER_TIMEOUT=14, **slow)
            wait_workers([proc], timeout=60)
            stats = json.loads((tmp_path / "w" / "stats.json").read_text())
            log = web.read_log()
        else:
            crawl = run_crawl(
                web, tmp_path / "w", *seeds, settings={**slow, "CLOSESPIDER_TIMEOUT": 14}
            )
            assert crawl.returncode == 0, crawl.stderr[-3000:]
            stats, log = crawl.stats, crawl.requests
    pages = by_page(log)
    assert len(pages) == 11
    assert stats["larbin/revisit/expired"] > 0  # due pages waited past their lease
    revisits = sum(len(records) - 1 for records in pages.values())
    applied = sum(stats.get(f"larbin/revisit/{k}", 0) for k in ("changed", "unchanged"))
    assert revisits == applied, (revisits, applied, stats)  # no fetch thrown away as stale
