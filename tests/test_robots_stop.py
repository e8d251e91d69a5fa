"""A robots.txt read cut by a stop (``CrawlStopping``) says nothing of the site: the pages
waiting on it end unsent with their records kept, and the resumed crawl reads it again."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler
from twisted.internet.defer import Deferred

from larbinscrapy import meta as M
from larbinscrapy.middlewares.robots import RobotsMiddleware, site_key
from larbinscrapy.stopping import CrawlStopping
from settings.base import ROBOTSTXT_PARSER
from tests.support.crawl import LARBIN_DEFAULTS


class _Engine:
    """Scrapy's engine as far as the robots middleware uses it: one download in flight."""

    def __init__(self) -> None:
        self.download = Deferred()
        self.asked: list[str] = []

    async def download_async(self, request: Request) -> Any:
        self.asked.append(request.url)
        from scrapy.utils.defer import maybe_deferred_to_future

        return await maybe_deferred_to_future(self.download)


def test_a_robots_txt_cut_by_a_stop_drops_its_waiting_pages_unsent_and_reads_nothing():
    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_PARSER": ROBOTSTXT_PARSER,
        }
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    engine = _Engine()
    crawler.engine = engine  # type: ignore[assignment]
    loop = asyncio.get_event_loop()
    first, second = Request("http://h.test/a"), Request("http://h.test/b")
    tasks = [loop.create_task(mw.process_request(r)) for r in (first, second)]
    loop.run_until_complete(asyncio.sleep(0.05))
    assert engine.asked == ["http://h.test/robots.txt"]  # one read for the site's pages
    engine.download.errback(CrawlStopping("the crawl is stopping: not sent"))
    done = loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    assert [type(e) for e in done] == [CrawlStopping, CrawlStopping]  # neither page is sent
    assert first.meta.get(M.OUTPUT_DONE) and second.meta.get(M.OUTPUT_DONE)  # records kept
    assert not mw.known(site_key(first.url))  # the resumed crawl reads the robots.txt again


class _Answering:
    """Scrapy's engine as far as the robots middleware uses it: every robots.txt answers
    ``body`` at once."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def download_async(self, request: Request) -> Any:
        from scrapy.http import TextResponse

        return TextResponse(request.url, status=200, body=self.body, request=request)


def _ours(snapshot: Any) -> int:
    """Bytes allocated by larbinscrapy's own lines (not the test's logging or pytest's)."""
    import tracemalloc

    mine = snapshot.filter_traces([tracemalloc.Filter(True, "*/larbinscrapy/*")])
    return sum(stat.size for stat in mine.statistics("filename"))


def _held_by_sites(mw: RobotsMiddleware, loop: Any, urls: list[str]) -> int:
    """Bytes larbinscrapy's lines keep after a page of each of ``urls`` passed the robots
    middleware (each allowed: the coroutine reading the robots.txt returns None)."""
    import gc
    import tracemalloc

    assert loop.run_until_complete(mw.process_request(Request("http://warm.test/"))) is None
    gc.collect()
    tracemalloc.start()
    try:
        before = _ours(tracemalloc.take_snapshot())
        for url in urls:
            assert loop.run_until_complete(mw.process_request(Request(url))) is None
        gc.collect()
        return _ours(tracemalloc.take_snapshot()) - before
    finally:
        tracemalloc.stop()


def test_sites_with_the_same_robots_txt_share_its_rules():
    """Most sites of a broad crawl serve one of a few robots.txt files, and a site's rules are
    kept for its whole life (RFC 9309: up to 24 hours): 2,000 sites with one robots.txt hold
    its rules once, their state costs the site's name and its entry, not a copy of the rules."""

    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_PARSER": ROBOTSTXT_PARSER,
        }
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    crawler.engine = _Answering(  # type: ignore[assignment]
        b"User-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\nAllow: /private/ok\n"
    )
    loop = asyncio.new_event_loop()  # nothing other tests left on a shared loop runs meanwhile
    urls = [f"http://site{n}.example.test/page" for n in range(2000)]
    held = _held_by_sites(mw, loop, urls)
    assert all(mw.known(site_key(url)) for url in urls)
    with pytest.raises(IgnoreRequest):  # the shared rules still decide each site's pages
        mw.process_request(Request("http://site7.example.test/private/x"))
    mw.process_request(Request("http://site7.example.test/private/ok"))
    loop.close()
    # the site's name, its entry and the entry's tuple; a copy of these rules a site costs
    # about as much again
    assert held / len(urls) < 300, f"{held / len(urls):.0f} bytes a site"


class _Moving(_Answering):
    """Every http site's robots.txt redirects to its https site's, which answers ``body``."""

    async def download_async(self, request: Request) -> Any:
        from scrapy.http import TextResponse

        request.meta[M.REDIRECT_URLS] = [request.url]
        moved = request.url.replace("http://", "https://", 1)
        return TextResponse(moved, status=200, body=self.body, request=request)


def test_the_sites_along_a_robots_txt_redirect_share_one_entry():
    """Most sites of a broad crawl moved (http to https, a bare name to www): the answer at the
    end of a robots.txt redirect is the rules of every site along it, kept for each for the
    crawl's life. Their one entry is shared: a moved site costs its name, not another copy."""

    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_PARSER": ROBOTSTXT_PARSER,
        }
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    crawler.engine = _Moving(b"User-agent: *\nDisallow: /private/\n")  # type: ignore[assignment]
    loop = asyncio.new_event_loop()
    urls = [f"http://site{n}.example.test/page" for n in range(2000)]
    held = _held_by_sites(mw, loop, urls)
    loop.close()
    moved = [url.replace("http://", "https://", 1) for url in urls]
    assert all(mw.known(site_key(url)) for url in urls + moved)
    assert crawler.stats.get_value("larbin/robots/moved") == len(urls) + 1  # and warm.test
    # two names and their slots, one entry; each site its own entry was ~400 bytes
    assert held / len(urls) < 360, f"{held / len(urls):.0f} bytes a site and the site it moved to"


class _Failing(_Answering):
    """Every robots.txt answers ``body``, but failing.test's answers 503 (unreachable)."""

    async def download_async(self, request: Request) -> Any:
        from scrapy.http import TextResponse

        self.asked = [*getattr(self, "asked", []), request.url]
        status = 503 if "failing.test" in request.url else 200
        return TextResponse(request.url, status=status, body=self.body, request=request)


def test_a_broad_crawl_keeps_the_rules_of_a_bounded_number_of_sites():
    """A broad crawl meets a million sites, and RFC 9309 lets their rules live a day: past
    LARBIN_ROBOTS_RESIDENT_MAX sites the least recently used are forgotten (counted) and read
    again if met again; a site in use stays, and so does a failing site's back-off."""
    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_PARSER": ROBOTSTXT_PARSER,
            "LARBIN_ROBOTS_RESIDENT_MAX": 1000,
        }
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    engine = _Failing(b"User-agent: *\nDisallow: /private/\n")
    crawler.engine = engine  # type: ignore[assignment]
    loop = asyncio.new_event_loop()

    def fetch(url: str) -> None:
        with contextlib.suppress(IgnoreRequest):
            got = mw.process_request(Request(url))
            if got is not None:
                loop.run_until_complete(got)

    fetch("http://failing.test/a")
    for n in range(3000):
        fetch(f"http://site{n}.example.test/page")
        fetch("http://site0.example.test/again")  # in use all along
    sites = [site_key(f"http://site{n}.example.test/") for n in range(3000)]
    resident = sum(mw.known(key) for key in sites)
    assert resident <= 1000, f"the rules of {resident:,} sites kept"
    assert crawler.stats.get_value("larbin/robots/evicted") == 3000 - resident
    assert mw.known(sites[0]) and mw.known(sites[-1])
    assert mw.known(site_key("http://failing.test/"))  # its back-off kept: not asked again
    asked = len(engine.asked)
    fetch("http://failing.test/b")
    fetch("http://site5.example.test/again")  # forgotten: read again
    loop.close()
    assert engine.asked[asked:] == ["http://site5.example.test/robots.txt"]


def test_a_page_given_back_after_its_sites_rules_were_read_is_not_read_for_again():
    """A page whose site's robots.txt was just read waits for its host's delay back in the
    frontier (the politeness gate gives it back). A broad crawl may read many robots.txt
    meanwhile: with the site's rules forgotten, the page used to read the file again, be given
    back again, and so on for good. The rules' verdict travels with that page until they end;
    another URL (a redirect's) and a page met after they ended are checked again."""
    from larbinscrapy.middlewares.politeness import PolitenessMiddleware

    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "ROBOTSTXT_OBEY": True,
            "ROBOTSTXT_PARSER": ROBOTSTXT_PARSER,
            "LARBIN_ROBOTS_RESIDENT_MAX": 2,
        }
    )
    mw = RobotsMiddleware.from_crawler(crawler)
    engine = _Failing(b"User-agent: *\nDisallow: /private/\n")
    crawler.engine = engine  # type: ignore[assignment]
    loop = asyncio.new_event_loop()

    def check(request: Request) -> None:
        got = mw.process_request(request)
        if got is not None:
            loop.run_until_complete(got)

    page = Request("http://a.test/page")
    check(page)
    given_back = PolitenessMiddleware._back_to_frontier(page)  # as the gate gives it back
    for n in range(3):  # the cap of two: a.test's rules forgotten
        check(Request(f"http://other{n}.test/"))
    assert not mw.known(site_key(page.url))
    asked = len(engine.asked)
    check(given_back)
    assert engine.asked[asked:] == []  # allowed already: not read again
    moved = given_back.replace(url="http://a.test/moved")  # a redirect keeps the meta
    check(moved)
    assert engine.asked[asked:] == ["http://a.test/robots.txt"]
    assert moved.meta[M.ROBOTS_CHECKED][0] == moved.url  # the mark follows the URL checked
    for n in range(3, 6):
        check(Request(f"http://other{n}.test/"))
    ttl = mw.policy.ttl
    # past the rules' life (a wall-clock end, kept through the disk frontier): read again
    page.meta[M.ROBOTS_CHECKED] = [page.url, time.time() - 1]
    asked = len(engine.asked)
    check(page)
    assert engine.asked[asked:] == ["http://a.test/robots.txt"]
    assert time.time() + ttl - 5 < page.meta[M.ROBOTS_CHECKED][1] <= time.time() + ttl
    # a page the rules disallow is refused, never marked
    private = Request("http://a.test/private/x")
    with pytest.raises(IgnoreRequest):
        check(private)
    assert M.ROBOTS_CHECKED not in private.meta
    loop.close()
