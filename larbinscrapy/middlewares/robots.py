"""larbin's NamedSite robots.txt step: fetched once per site, before any page of the site.

Scrapy's ``RobotsTxtMiddleware`` shares one Deferred among every request that arrives while a
site's robots.txt is downloading; under the asyncio reactor only the first waiter gets the parser
and the others get ``None`` and go through unchecked (measured: 1-4 disallowed pages per
4,600-page crawl). Here each waiter has its own Deferred, so every request is checked.

Also:
* the robots.txt request borrows the IP lease of the page request that needs it, so it is
  scheduled under the same per-IP politeness instead of jumping the queue;
* ``Crawl-delay`` for our user agent (Scrapy ignores it) raises its host's delay, capped at
  ``LARBIN_MAX_CRAWL_DELAY``;
* a robots.txt that is missing, an error page or unreachable means "everything allowed" (larbin's
  behaviour), and a body that is not robots.txt at all parses to no rules (protego is tolerant).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.defer import Deferred

from larbinscrapy import meta as M
from larbinscrapy.parse.urls import site_of, site_origin
from larbinscrapy.politeness.ipsites import Politeness, politeness_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser

logger = logging.getLogger(__name__)


class RobotsMiddleware(RobotsTxtMiddleware):
    """``RobotsTxtMiddleware`` with per-waiter Deferreds, lease borrowing and Crawl-delay."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._waiters: dict[str, list[Deferred[RobotParser | None]]] = {}
        self._politeness: Politeness | None = None
        crawler.signals.connect(self._find_politeness, signal=signals.spider_opened)

    def _find_politeness(self) -> None:
        self._politeness = politeness_of(self.crawler)

    def known(self, site: str) -> bool:
        """True once the robots.txt of ``site`` (``urls.site_of``) is parsed (or known absent)."""
        parser = self._parsers.get(site, 0)
        return parser != 0 and not isinstance(parser, Deferred)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        # one key per site however its URLs spell the port (https://h = https://h:443), the
        # key the frontier and the sitemap reader name sites by
        netloc = site_of(request.url)
        if netloc in self._parsers:
            known = self._parsers[netloc]
            if not isinstance(known, Deferred):
                return known
            waiter: Deferred[RobotParser | None] = Deferred()
            self._waiters[netloc].append(waiter)
            return await maybe_deferred_to_future(waiter)

        self._parsers[netloc] = Deferred()  # marks "in progress" for known() and the parent
        self._waiters[netloc] = []
        meta: dict[str, Any] = {"dont_obey_robotstxt": True}
        if M.LEASE in request.meta:
            meta[M.BORROW] = request.meta[M.LEASE]
            meta[M.IP] = request.meta.get(M.IP)
        robotsreq = Request(
            site_origin(netloc) + "/robots.txt",
            priority=self.DOWNLOAD_PRIORITY,
            meta=meta,
            callback=NO_CALLBACK,
        )
        parser: RobotParser | None = None
        try:
            response = await self.crawler.engine.download_async(robotsreq)
            parser = await self._parse(response, request)
        except Exception as exc:
            if not isinstance(exc, IgnoreRequest):
                self._stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
                logger.debug("robots.txt of %s unavailable (%s): everything allowed", netloc, exc)
        self._stats.inc_value("robotstxt/request_count")
        self._parsers[netloc] = parser
        for waiter in self._waiters.pop(netloc):
            waiter.callback(parser)
        return parser

    async def _parse(self, response: Response, request: Request) -> RobotParser | None:
        self._stats.inc_value("robotstxt/response_count")
        self._stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        if response.status != HTTPStatus.OK:
            return None
        parser = build_from_crawler(self._parserimpl, self.crawler, response.body)
        await self.crawler.signals.send_catch_log_async(
            signal=signals.robots_parsed, robotparser=parser, request=request
        )
        self._apply_crawl_delay(parser, response)
        return parser

    def _apply_crawl_delay(self, parser: RobotParser, response: Response) -> None:
        protego = getattr(parser, "rp", None)  # ProtegoRobotParser keeps the Protego object
        host = urlparse_cached(response).hostname
        if protego is None or host is None or self._politeness is None:
            return
        agent = self._robotstxt_useragent or self._default_useragent
        delay = protego.crawl_delay(agent)
        if delay:
            hosts = self._politeness.table.hosts
            hosts.set_crawl_delay(hosts.get(host), float(delay))
            self._stats.inc_value("larbin/robots/crawl_delay")
