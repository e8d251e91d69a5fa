"""A crawl that is stopping sends nothing new: requests held inside the downloader (a
politeness wait, a throttling pause, the status page's pause) end at once instead.

Scrapy's graceful stop (Ctrl-C, ``/api/stop``) closes the engine once every request in the
downloader has ended; a request waiting out a 60 s ``Retry-After`` pause there kept the stop
waiting for the whole pause, then was sent after it. Scrapy has no signal at the start of a
stop (``spider_closed`` comes after the downloader is empty): the waits look at the engine's
``running`` flag at least every ``POLL`` seconds.

A held request ends with ``CrawlStopping`` (an ``IgnoreRequest``, so nothing logs it) and its
page's output marked done, so its frontier record is not acknowledged: the resumed crawl
fetches it, as after a ``kill -9``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from scrapy.exceptions import IgnoreRequest

from larbinscrapy import meta as M

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

POLL = 0.5  # seconds: the longest a held request waits before it looks whether the crawl stops


class CrawlStopping(IgnoreRequest):
    """A held request the stopping crawl never sends (module doc)."""


def stopping(crawler: Crawler) -> bool:
    """True once the engine was asked to stop (its ``running`` flag is down)."""
    try:
        engine = crawler.engine
    except RuntimeError:  # no engine: a component built on its own
        return False
    return engine is not None and not engine.running and engine.spider is not None


def drop_held(crawler: Crawler, request: Request) -> NoReturn:
    """End a held ``request`` unsent: counted, its record left for the resumed crawl."""
    request.meta[M.OUTPUT_DONE] = True  # the spider's errback does not acknowledge it
    crawler.stats.inc_value("larbin/stopping/held_dropped")
    raise CrawlStopping("the crawl is stopping: not sent")
