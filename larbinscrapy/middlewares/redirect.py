"""Redirects obey the rules links obey: a 3xx target passes the link gate's URL filters.

A target on another host is not pinned to the address of the host it came from: it is looked
up as its own host (a robots.txt redirect goes straight back to the downloader, so the
frontier's ``clear_trip`` never sees it), and its politeness is that host's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NoReturn

from scrapy import signals
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.exceptions import IgnoreRequest

from larbinscrapy import meta as M
from larbinscrapy.gate.admission import spider_url_filter
from larbinscrapy.gate.urlfilter import UrlFilter
from larbinscrapy.parse.urls import host_of

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

INVALID = "invalid"  # a Location that no Request can be built from (a port out of range...)


class FilteredRedirectMiddleware(RedirectMiddleware):
    """``RedirectMiddleware`` whose targets pass the crawl's ``UrlFilter`` (module doc)."""

    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)
        self.url_filter = UrlFilter.from_settings(settings)
        self._logged: set[str] = set()  # reasons whose first drop was logged

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        mw = super().from_crawler(crawler)
        crawler.signals.connect(mw.spider_opened, signal=signals.spider_opened)
        return mw

    def spider_opened(self, spider: Spider) -> None:
        self.url_filter = spider_url_filter(spider) or self.url_filter

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        try:
            result = super().process_response(request, response)
        except ValueError as exc:  # Request() refuses the target: one counted drop, no traceback
            location = response.headers.get("Location") or b""
            self._refuse(INVALID, location.decode("latin-1"), str(exc))
        if result is response:
            return result
        if host_of(result.url) != host_of(request.url):
            result.meta.pop(M.IP, None)  # looked up as its own host
        if M.REFERER not in request.meta:
            return result  # a seed's (the user's choice) or a robots.txt's
        depth = request.meta.get(M.SITE_DEPTH, 0)  # the redirecting URL's, as a fetch of it
        why = self.url_filter.reason(result.url, host_of(result.url), depth, host_of(request.url))
        if why is not None:
            self._refuse(why, result.url, f"redirected from {request.url}")
        return result

    def _refuse(self, reason: str, url: str, detail: str) -> NoReturn:
        """Count the target under ``larbin/filtered/<reason>`` (log the first) and drop it."""
        self.crawler.stats.inc_value(f"larbin/filtered/{reason}")
        if reason not in self._logged:
            self._logged.add(reason)
            logger.info(
                "Not following a redirect to %s (%s, %s); further ones are counted in "
                "larbin/filtered/%s",
                url[:200],
                reason,
                detail[:200],
                reason,
            )
        raise IgnoreRequest(f"redirect target filtered ({reason}): {url[:200]}")
