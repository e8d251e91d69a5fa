"""A robots.txt read cut by a stop (``CrawlStopping``) says nothing of the site: the pages
waiting on it end unsent with their records kept, and the resumed crawl reads it again."""

from __future__ import annotations

import asyncio
from typing import Any

from scrapy import Request
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
