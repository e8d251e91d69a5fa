"""``LarbinScheduler`` behaviour, written once and run against three variants (as Scrapy's
``tests/test_scheduler.py`` does): memory only (a temporary directory), ``JOBDIR``, and
``JOBDIR`` closed and reopened between enqueueing and dequeueing.

The crawler is real (``get_crawler``), without an engine: the scheduler then keeps its own
``IpTable`` with the host as the IP. The end of a download and of a page are the real signals
the downloader and the link gate send (``request_left_downloader``, ``request_done``).
``IpRing`` is tested on its own with a real ``IpTable`` whose clock the test sets.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler

from larbinscrapy import signals as larbin_signals
from larbinscrapy.frontier.scheduler import LarbinScheduler
from larbinscrapy.frontier.sites import READY, IpRing, Site
from tests.conftest import ip_table


class FrontierSpider(Spider):
    name = "frontier"

    def parse(self, response):  # pragma: no cover - never called here
        return []

    def on_error(self, failure):  # pragma: no cover - never called here
        return None


def url(host: str, n: int | str, ext: str = ".html") -> str:
    return f"http://{host}.test/{n}{ext}"


class Harness:
    """One scheduler variant: ``push`` enqueues (and, reopening, closes and reopens)."""

    def __init__(self, variant: str, tmp_path: Path, settings: dict) -> None:
        self.variant = variant
        self.settings = {
            "DUPEFILTER_CLASS": "larbinscrapy.dupefilter.BitmapDupeFilter",
            "REQUEST_FINGERPRINTER_CLASS": "larbinscrapy.urls.CanonicalUrlFingerprinter",
            "LARBIN_DUPEFILTER_MODE": "bitmap",
            "LARBIN_DUPEFILTER_BITS": 1 << 16,
            "LARBIN_MAX_URLS_PER_SITE": 40,
            "LARBIN_SEGMENT_URLS": 4,  # several segments even in small tests
            "LARBIN_PRIORITY_EXTENSIONS": "",
            "LARBIN_CHECKPOINT_INTERVAL": 1.0,
            "LARBIN_LOADED_SITES": 2000,
            "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            **settings,
        }
        if variant != "memory":
            self.settings["JOBDIR"] = str(tmp_path / "job")
        self.jobdir = self.settings.get("JOBDIR")
        self.sched = self._open()

    def _open(self) -> LarbinScheduler:
        self.crawler = get_crawler(FrontierSpider, self.settings)
        self.spider = FrontierSpider()
        sched = LarbinScheduler.from_crawler(self.crawler)
        sched.open(self.spider)
        return sched

    def push(self, *requests: Request) -> list[bool]:
        accepted = [self.sched.enqueue_request(r) for r in requests]
        if self.variant == "reopen":
            self.reopen()
        return accepted

    def reopen(self) -> None:
        self.sched.close("shutdown")
        self.sched = self._open()

    def finish(self, request: Request) -> None:
        """What the downloader and the link gate signal for a fetched and parsed page."""
        signals_ = self.crawler.signals
        signals_.send_catch_log(signals.request_left_downloader, request=request,
                                spider=self.spider)
        signals_.send_catch_log(larbin_signals.request_done, request=request)

    def fetch(self) -> Request | None:
        request = self.sched.next_request()
        if request is not None:
            self.finish(request)
        return request

    def drain(self, limit: int = 10_000) -> list[str]:
        urls = []
        while (request := self.fetch()) is not None and len(urls) < limit:
            urls.append(request.url)
        return urls

    def close(self) -> None:
        self.sched.close("finished")


@pytest.fixture(params=["memory", "jobdir", "reopen"])
def make(request, tmp_path):
    made = []

    def factory(**settings) -> Harness:
        harness = Harness(request.param, tmp_path, settings)
        made.append(harness)
        return harness

    yield factory
    for harness in made:
        if not harness.sched.fifos[0]._closed:
            harness.close()


def reqs(*urls: str, **kwargs) -> list[Request]:
    return [Request(u, **kwargs) for u in urls]


# -- behaviour, once for every variant ---------------------------------------------------------

def test_fifo_within_a_site(make):
    h = make()
    urls = [url("a", n) for n in range(11)]
    assert h.push(*reqs(*urls)) == [True] * 11
    assert h.drain() == urls


def test_priority_tier_before_normal(make):
    h = make(LARBIN_PRIORITY_EXTENSIONS=".pdf .ps")
    normal = [url("a", n) for n in range(3)]
    h.push(*reqs(*normal))
    h.push(Request(url("a", "p1"), priority=1), Request(url("a", "doc", ".pdf")),
           Request(url("a", "p2"), meta={"larbin_priority": 1}))
    assert len(h.sched) == 6
    assert h.drain() == [url("a", "p1"), url("a", "doc", ".pdf"), url("a", "p2"), *normal]


def test_site_cap_overflows_to_wait_fifo_and_reads_back(make):
    h = make(LARBIN_MAX_URLS_PER_SITE=3)
    big = [url("a", n) for n in range(9)]
    small = [url("b", n) for n in range(2)]
    h.push(*reqs(*big), *reqs(*small))
    first = h.sched.next_request()
    assert max(len(site.queue) for site in h.sched.sites.values()) <= 3
    h.finish(first)
    out = [first.url, *h.drain()]
    assert [u for u in out if u in big] == big  # FIFO order, overflow included
    assert sorted(out) == sorted(big + small)
    # the small site is not stuck behind the big site's overflow
    assert out.index(small[0]) <= 3
    assert h.crawler.stats.get_value("larbin/frontier/to_wait") >= len(big) - 3
    # each refill reads a wait FIFO once around at most: no churn through the same records
    assert h.crawler.stats.get_value("larbin/frontier/to_wait") <= 2 * len(big)
    assert len(h.sched) == 0


def test_round_robin_over_ips(make):
    h = make()
    a = [url("a", n) for n in range(4)]
    b = [url("b", n) for n in range(4)]
    h.push(*reqs(*a), *reqs(*b))
    out = h.drain()
    assert out == [u for pair in zip(a, b, strict=True) for u in pair]


def test_request_gets_ip_slot_and_lease(make):
    h = make()
    h.push(Request(url("a", 1)))
    request = h.sched.next_request()
    assert request.meta["download_slot"] == request.meta["larbin_ip"] == "a.test"
    assert request.meta["larbin_lease"] == "a.test"
    assert h.sched.table.get("a.test").busy == 1
    h.finish(request)
    assert h.sched.table.get("a.test").busy == 0


def test_len_and_has_pending_requests(make):
    h = make()
    assert len(h.sched) == 0 and not h.sched.has_pending_requests()
    h.push(*reqs(*(url("a", n) for n in range(5)), url("b", 0)))
    assert len(h.sched) == 6 and h.sched.has_pending_requests()
    h.fetch()
    assert len(h.sched) == 5
    h.drain()
    assert len(h.sched) == 0 and not h.sched.has_pending_requests()


def test_duplicates_filtered(make):
    h = make()
    assert h.push(Request(url("a", 1)), Request(url("a", 1) + "#frag"),
                  Request(url("a", 1), dont_filter=True)) == [True, False, True]
    assert h.drain() == [url("a", 1), url("a", 1)]


def test_pending_while_ip_cools_down_and_engine_wakeup(make):
    from twisted.internet import reactor

    h = make(DOWNLOAD_DELAY=0.3)
    h.push(*reqs(url("a", 1), url("a", 2)))
    assert h.fetch().url == url("a", 1)
    assert h.sched.next_request() is None  # a.test cools down
    assert h.sched.has_pending_requests() and len(h.sched) == 1
    wakeups = [c for c in reactor.getDelayedCalls() if c.func == h.sched._wake_engine]
    assert wakeups, "no wakeup scheduled for when the IP is ready again"
    assert 0.1 < wakeups[0].getTime() - reactor.seconds() <= 0.3
    asyncio.get_event_loop().run_until_complete(asyncio.sleep(0.35))
    assert h.fetch().url == url("a", 2)


def test_files_removed_when_empty_at_close(make):
    h = make()
    h.push(*reqs(*(url("a", n) for n in range(9))))
    directory = h.sched._dir
    assert directory.exists()
    h.drain()
    h.close()
    if h.jobdir:
        assert not (Path(h.jobdir) / "frontier").exists()
    else:
        assert not directory.exists()  # the temporary directory


def test_left_queued_counted_at_close(make):
    h = make()
    h.push(*reqs(*(url("a", n) for n in range(5))))
    h.fetch()
    h.close()
    assert h.crawler.stats.get_value("larbin/frontier/left_queued") == 4


# -- JOBDIR only: what a restart gives back ----------------------------------------------------

@pytest.fixture
def make_jobdir(tmp_path):
    made = []

    def factory(**settings) -> Harness:
        made.append(Harness("jobdir", tmp_path, settings))
        return made[-1]

    yield factory
    for harness in made:
        if not harness.sched.fifos[0]._closed:
            harness.close()


def test_unacked_requests_come_back_after_reopen(make_jobdir):
    h = make_jobdir()
    urls = [url("a", n) for n in range(6)]
    h.push(*reqs(*urls))
    assert h.fetch().url == urls[0]  # fetched and acked
    leased = h.sched.next_request()  # handed out, never finished
    assert leased.url == urls[1]
    h.reopen()
    assert len(h.sched) == 5
    assert h.drain() == urls[1:]
    h.close()
    assert not (Path(h.jobdir) / "frontier").exists()


def test_seen_urls_stay_seen_after_reopen(make_jobdir):
    h = make_jobdir()
    h.push(Request(url("a", 1)))
    h.drain()
    h.reopen()
    assert h.push(Request(url("a", 1))) == [False]


def test_redirect_reenqueue_acks_the_old_record(make_jobdir):
    h = make_jobdir()
    h.push(Request(url("a", "old")))
    handed = h.sched.next_request()
    h.crawler.signals.send_catch_log(signals.request_left_downloader, request=handed,
                                     spider=h.spider)
    redirected = handed.replace(url=url("a", "new"))  # what RedirectMiddleware builds
    assert h.sched.enqueue_request(redirected)
    assert "larbin_rid" not in redirected.meta and "download_slot" not in redirected.meta
    h.reopen()  # the old record must not come back; the new one must
    assert h.drain() == [url("a", "new")]


# -- IpRing and Site with a real IpTable ---------------------------------------------------------

class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ready_site(key: str, ip: str, n: int) -> Site:
    site = Site(key, key, state=READY, ip=ip)
    site.queue.extend((0, i, f"{key}/{i}".encode()) for i in range(n))
    return site


def test_ring_rotates_sites_sharing_an_ip_and_waits_for_the_delay():
    clock = Clock()
    table = ip_table(1.0, 1, clock=clock)
    ring = IpRing(table)
    x, y = ready_site("x", "10.0.0.1", 3), ready_site("y", "10.0.0.1", 3)
    ring.add_site(x)
    ring.add_site(y)
    served = []
    for _ in range(4):
        st, site = ring.next_ready(clock.now)
        served.append(site.key)
        table.acquire(st)
        assert ring.next_ready(clock.now) is None  # one connection: busy
        table.finish(st, release=True, failed=False)
        ring.place(st.ip)
        assert ring.next_ready(clock.now) is None  # cooling for the delay
        assert ring.next_wakeup() == pytest.approx(clock.now + 1.0)
        clock.now += 1.0
    assert served == ["x", "y", "x", "y"]


def test_ring_round_robin_over_ips_skips_cooling_ones():
    clock = Clock()
    table = ip_table(2.0, 1, clock=clock)
    ring = IpRing(table)
    sites = [ready_site(k, ip, 5) for k, ip in (("a", "1.1.1.1"), ("b", "2.2.2.2"))]
    for site in sites:
        ring.add_site(site)
    st, site = ring.next_ready(clock.now)
    assert site.key == "a"
    table.acquire(st)
    table.finish(st, release=True, failed=False)
    ring.place(st.ip)
    _st2, site2 = ring.next_ready(clock.now)
    assert site2.key == "b"  # a cools down, b is served meanwhile


def test_ring_forgets_a_dead_ip():
    clock = Clock()
    table = ip_table(0.0, 1, max_failures=1, clock=clock)
    ring = IpRing(table)
    site = ready_site("a", "1.1.1.1", 2)
    ring.add_site(site)
    st, _ = ring.next_ready(clock.now)
    table.acquire(st)
    table.finish(st, release=True, failed=True)
    assert st.dead
    ring.place(st.ip)
    assert ring.next_ready(clock.now) is None
    assert ring.dead_ip_sites(st.ip) == [site]
    ring.site_emptied(site)
    assert ring.next_wakeup() is None
