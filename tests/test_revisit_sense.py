"""Revisits that make sense, and priority URLs that are their site's next fetch (issue 26,
findings 7 and 8). Fake clocks throughout; the scheduler and the schedule are the real ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Any

import pytest
import redis
from scrapy import Request, Spider, signals
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from larbinscrapy import meta as M
from larbinscrapy import signals as larbin_signals
from larbinscrapy.frontier.scheduler import LarbinScheduler
from larbinscrapy.parse.urls import fingerprint_url
from larbinscrapy.pipelines.contentdup import ContentDupPipeline
from larbinscrapy.revisit.backends import LocalSchedule
from larbinscrapy.revisit.entry import Entry
from larbinscrapy.revisit.redis_store import RedisRevisitStore
from larbinscrapy.revisit.store import RevisitStore
from settings import base
from tests.support.cores import ManualClock
from tests.support.crawl import (
    ROOT,
    crawl_command,
    run_crawl,
    seeds_args,
    settings_of,
)
from tests.support.revisit import fetch, local_revisits, taken
from testweb.changing import start_changing

if TYPE_CHECKING:
    from pathlib import Path


# -- finding 7: the bucket never delays a page by more than a quarter of its interval --------
@pytest.mark.parametrize(("minimum", "interval"), [(1.0, 2.0), (60.0, 60.0), (3600.0, 86400.0)])
def test_no_page_is_revisited_later_than_its_interval_and_a_quarter(minimum, interval):
    clock = ManualClock(1_000_000.0)
    ext = local_revisits(
        clock,
        LARBIN_REVISIT_INTERVAL_MIN=minimum,
        LARBIN_REVISIT_INTERVAL=interval,
        LARBIN_REVISIT_BUCKET=300.0,
        LARBIN_REVISIT_LEASE=1e9,
    )
    rng = random.Random(7)
    fetched = {}
    for n in range(200):  # pages fetched at random moments over two intervals
        at = clock.now + rng.uniform(0, 2 * interval)
        fp = fingerprint_url(f"http://a.test/{n}")
        ext.schedule.add(Entry(fp, f"http://a.test/{n}", at + interval, interval))
        fetched[fp] = at
    tick = min(1.0, ext.schedule.tick_interval)  # how often the extension looks
    late = []
    while fetched:
        due = ext.schedule.store.next_due()  # type: ignore[union-attr]
        if due is not None and due > clock.now + tick:  # skip the ticks that find nothing
            clock.now += (due - clock.now) // tick * tick
        clock.now += tick
        for entry in taken(ext, clock.now):
            late.append(clock.now - fetched.pop(entry.fp) - interval)
    assert max(late) <= interval / 4, (max(late), interval)
    assert min(late) >= 0  # and never early
    ext.schedule.close()


# -- finding 8: 404/410 pages have their own, slow back-off, or none ---------------------------
def test_a_gone_page_waits_its_own_interval_and_backs_off():
    clock = ManualClock(1_000_000.0)
    ext = local_revisits(
        clock,
        LARBIN_REVISIT_INTERVAL_MIN=1.0,
        LARBIN_REVISIT_INTERVAL=2.0,
        LARBIN_REVISIT_GONE_INTERVAL=1000.0,
        LARBIN_REVISIT_INTERVAL_MAX=10_000.0,
    )
    fetch(ext, "http://a.test/missing", 404)
    fetch(ext, "http://a.test/here", 200)
    clock.now += 10
    assert [e.url for e in taken(ext, clock.now)] == ["http://a.test/here"]
    clock.now += 1000
    (gone,) = [e for e in taken(ext, clock.now) if e.url.endswith("missing")]
    fetch(ext, gone.url, 410, token=gone.pack().hex())
    clock.now += 1500  # a second 404/410 doubles the wait (LARBIN_REVISIT_FACTOR)
    assert not [e for e in taken(ext, clock.now) if e.url.endswith("missing")]
    clock.now += 600
    assert [e.url for e in taken(ext, clock.now) if e.url.endswith("missing")]
    ext.schedule.close()


def test_with_gone_interval_0_a_gone_page_is_never_revisited():
    clock = ManualClock(1_000_000.0)
    ext = local_revisits(
        clock,
        LARBIN_REVISIT_INTERVAL_MIN=1.0,
        LARBIN_REVISIT_INTERVAL=2.0,
        LARBIN_REVISIT_GONE_INTERVAL=0,
    )
    fetch(ext, "http://a.test/missing", 404)
    fetch(ext, "http://a.test/later-gone", 200)
    clock.now += 10
    (entry,) = taken(ext, clock.now)
    fetch(ext, entry.url, 404, token=entry.pack().hex())
    assert len(ext.schedule) == 0
    assert ext.stats.get_value("larbin/revisit/gone") == 2
    ext.schedule.close()


# -- finding 8: a content duplicate is still one when revisited --------------------------------
def _item(url: str, body: bytes, fetch_count: int = 1) -> dict[str, Any]:
    return {"url": url, "body": body, "fetch_count": fetch_count}


def _kept(pipeline: ContentDupPipeline, item: dict[str, Any]) -> bool:
    try:
        pipeline.process_item(item)
    except DropItem:
        return False
    return True


def test_a_duplicate_yields_no_item_on_revisits_unless_it_changes_to_something_new(tmp_path):
    page = b"<html><body>the same text on two URLs</body></html>"
    pipeline = ContentDupPipeline(directory=str(tmp_path / "dup"), flush_interval=0)
    pipeline.open_spider()
    assert _kept(pipeline, _item("http://a.test/original", page))
    assert not _kept(pipeline, _item("http://a.test/copy", page))
    assert not _kept(pipeline, _item("http://a.test/copy", page, 2))  # unchanged revisit
    assert not _kept(pipeline, _item("http://a.test/copy", b"", 3))  # 304: still a copy
    assert _kept(pipeline, _item("http://a.test/original", page, 2))  # its own copy
    assert _kept(pipeline, _item("http://a.test/original", b"", 3))  # 304 of a kept page
    pipeline.close_spider()
    again = ContentDupPipeline(directory=str(tmp_path / "dup"), flush_interval=0)
    again.open_spider()  # the journal remembers the copy
    assert not _kept(again, _item("http://a.test/copy", b"", 4))
    assert _kept(again, _item("http://a.test/copy", b"<p>news of its own</p>", 5))
    assert _kept(again, _item("http://a.test/copy", b"", 6))  # 304 of what it now is
    again.close_spider()


# -- finding 8: a clean stop leaves nothing to hand out again ---------------------------------
def _schedule(path: Path, clock: ManualClock) -> LocalSchedule:
    return LocalSchedule(RevisitStore(str(path), 10.0, clock), 100, 3600.0, lambda *a: None)


def test_a_clean_stop_hands_nothing_out_again_and_a_crash_does(tmp_path):
    clock = ManualClock(1_000_000.0)
    schedule = _schedule(tmp_path / "clean", clock)
    schedule.open()
    for n in range(5):
        schedule.add(
            Entry(fingerprint_url(f"http://a.test/{n}"), f"http://a.test/{n}", clock.now + 5, 5.0)
        )
    clock.now += 20
    in_flight: list[Entry] = []
    schedule.take(clock.now).addCallback(in_flight.extend)
    assert len(in_flight) == 5
    schedule.close()  # SIGINT: the frontier keeps the five, flushed
    again = _schedule(tmp_path / "clean", clock)
    assert again.open() == []
    assert again.open() == []  # the extension opens twice (from_crawler, spider_opened)
    assert len(again) == 5  # still scheduled: their fetch reschedules them
    again.store.checkpoint()  # then a crash: no close
    crashed = _schedule(tmp_path / "clean", clock)
    assert {e.url for e in crashed.open()} == {e.url for e in in_flight}
    crashed.close()


# -- finding 7: a priority URL is its site's next fetch -----------------------------------------
class PrioritySpider(Spider):
    """The spider the scheduler is opened with."""

    name = "priority"


def test_a_priority_url_is_the_sites_next_fetch_not_behind_its_queue(tmp_path):
    settings = settings_of(
        base,
        JOBDIR=str(tmp_path / "job"),
        DOWNLOAD_DELAY=0,
        LARBIN_ALLOWED_NETWORKS="127.0.0.0/8",
        LARBIN_FRONTIER_URLS_PER_SITE_MAX=50,
    )
    crawler = get_crawler(PrioritySpider, settings)
    sched = LarbinScheduler.from_crawler(crawler)
    spider = PrioritySpider()
    sched.open(spider)
    site = "http://127.0.0.1:8080"
    for n in range(30):  # the site's loaded queue
        assert sched.enqueue_request(Request(f"{site}/page{n}"))
    order = []

    def fetch() -> None:
        deadline = time.monotonic() + 5
        while (request := sched.next_request()) is None:
            assert time.monotonic() < deadline
            asyncio.get_event_loop().run_until_complete(asyncio.sleep(0.01))
        order.append(request.url)
        crawler.signals.send_catch_log(
            signals.request_left_downloader, request=request, spider=spider
        )
        crawler.signals.send_catch_log(larbin_signals.request_done, request=request)

    fetch()
    fetch()
    sched.enqueue_request(Request(f"{site}/injected", meta={M.PRIORITY: True}))
    sched.enqueue_request(Request(f"{site}/injected2", meta={M.PRIORITY: True}))
    fetch()
    fetch()
    fetch()
    assert order == [
        f"{site}/page0",
        f"{site}/page1",
        f"{site}/injected",
        f"{site}/injected2",
        f"{site}/page2",
    ]
    sched.close("shutdown")


@pytest.mark.crawl
# -- finding 8, end to end: a continuous crawl stopped with Ctrl-C resumes without copies ------
def test_a_sigint_resume_hands_no_due_page_out_twice(tmp_path):
    settings = {
        "LARBIN_REVISIT": True,
        "LARBIN_REVISIT_INTERVAL": 1.0,
        "LARBIN_REVISIT_INTERVAL_MIN": 0.25,
        "LARBIN_REVISIT_INTERVAL_MAX": 2.0,
        "LARBIN_REVISIT_STREAK": 2,
        "LARBIN_FRONTIER_CHECKPOINT_INTERVAL": 0.2,
        "LARBIN_REVISIT_BUCKET": 0.05,
        "DOWNLOAD_DELAY": 0.3,
        "JOBDIR": str(tmp_path / "job"),
    }
    with start_changing(tmp_path / "web", period=3.0) as web:
        out = tmp_path / "run1"
        out.mkdir()
        cmd = crawl_command(web, out, *seeds_args(web.seeds), settings=settings)
        with open(out / "stderr.log", "w") as err:
            proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=err,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            deadline = time.monotonic() + 60
            while len(web.read_log()) < 150:  # revisits well under way, due pages queued
                assert proc.poll() is None, (out / "stderr.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the crawl is too slow"
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 0
        first = json.loads((out / "stats.json").read_text())
        assert first["finish_reason"] == "shutdown"
        second = run_crawl(
            web,
            tmp_path / "run2",
            *seeds_args(web.seeds),
            settings={**settings, "CLOSESPIDER_TIMEOUT": 4},
            timeout=60,
        )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "handed out again" not in second.stderr
    assert second.stats.get("larbin/revisit/stale", 0) == 0
    assert second.stats.get("larbin/revisit/due", 0) > 0  # and the schedule went on


@pytest.mark.crawl
def test_the_redis_schedule_never_hands_out_a_forgotten_page(redis_url):
    store = RedisRevisitStore(redis.Redis.from_url(redis_url), "t:revisit", 10)
    page = Entry(fingerprint_url("http://a.test/gone"), "http://a.test/gone", 100.0, 5.0)
    assert store.add(page)
    (taken,) = store.take(200.0, 3600.0)[2]
    assert store.done(taken, taken.evolve(due=float("inf")))  # SharedSchedule.forget
    assert store.take(1e12, 3600.0)[2] == []
