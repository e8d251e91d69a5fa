"""larbin's NamedSite robots.txt step, read as RFC 9309 says: fetched once per site (again after
``LARBIN_ROBOTS_TTL``) before any page of the site, and every waiting request checked."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import ProtegoRobotParser, RobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.defer import Deferred

from larbinscrapy import meta as M
from larbinscrapy.frontier import frontier_of
from larbinscrapy.parse.urls import site_of, site_origin
from larbinscrapy.politeness.ipsites import IpState, politeness_of
from larbinscrapy.politeness.robotsrules import DISALLOW_ALL, PARSE, RobotsPolicy, SiteRules

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from larbinscrapy.politeness import HostRegistry, RobotsCache

logger = logging.getLogger(__name__)


def site_key(url: str) -> str:
    """The key a site's robots.txt is kept under (every lookup goes through here): the frontier's
    and the sitemap reader's ``site_of``, so ``https://h`` and ``https://h:443`` are one site."""
    return site_of(url)


class _DisallowAll(RobotParser):
    """The parser of a site whose robots.txt is unreachable: nothing is allowed."""

    @classmethod
    def from_crawler(cls, crawler: Crawler, robotstxt_body: bytes) -> _DisallowAll:
        return cls()

    def allowed(self, url: str | bytes, user_agent: str | bytes) -> bool:
        return False


_DISALLOW_ALL = _DisallowAll()


class RobotsMiddleware(RobotsTxtMiddleware):
    """``RobotsTxtMiddleware`` with per-waiter Deferreds, lease borrowing, Crawl-delay and
    RFC 9309's reading of answers and expiry."""

    def __init__(self, crawler: Crawler, policy: RobotsPolicy | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(crawler)
        # our own state, never the parent's private attributes (they are Scrapy's to change)
        settings = crawler.settings
        self.stats = crawler.stats
        self.agent: str = settings["ROBOTSTXT_USER_AGENT"] or settings["USER_AGENT"]
        self.parser_class: type[RobotParser] = load_object(settings["ROBOTSTXT_PARSER"])
        self._site_parsers: dict[str, RobotParser | Deferred[RobotParser | None] | None] = {}
        self.policy = policy or RobotsPolicy.from_settings(crawler.settings)
        self.clock = clock
        self._rules: dict[str, SiteRules] = {}
        self._waiters: dict[str, list[Deferred[RobotParser | None]]] = {}
        self._politeness: HostRegistry | None = None
        self._shared: RobotsCache | None = None  # Redis workers: the rules all workers share
        crawler.signals.connect(self._find_politeness, signal=signals.spider_opened)

    def _find_politeness(self) -> None:
        self._politeness = politeness_of(self.crawler)
        frontier = frontier_of(self.crawler)
        self._shared = None if frontier is None else frontier.robots  # Redis workers

    def known(self, key: str) -> bool:
        """True once the robots.txt of the site ``key`` (``site_key``) is read."""
        parser = self._site_parsers.get(key, 0)
        return parser != 0 and not isinstance(parser, Deferred)

    def process_request(  # type: ignore[override]  # None at once: no coroutine to await
        self, request: Request, spider: Spider | None = None
    ) -> Coroutine[Any, Any, None] | None:
        """A site's rules in hand are applied at once; a coroutine only while they are read."""
        if request.meta.get("dont_obey_robotstxt"):
            return None
        url = request.url
        if url.startswith(("data:", "file:")):
            return None
        key = site_key(url)
        if key not in self._site_parsers:
            return super().process_request(request)
        known = self._site_parsers[key]
        if isinstance(known, Deferred) or self.policy.expired(self._rules[key], self.clock()):
            return super().process_request(request)
        self.process_request_2(known, request)
        return None

    def process_request_2(self, rp: RobotParser | None, request: Request) -> None:
        if rp is _DISALLOW_ALL:
            self.stats.inc_value("larbin/robots/unreachable")
            logger.debug("robots.txt unreachable, page not fetched: %s", request)
            raise IgnoreRequest("robots.txt unreachable (RFC 9309: complete disallow)")
        super().process_request_2(rp, request)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        key = site_key(request.url)
        if key in self._site_parsers:
            known = self._site_parsers[key]
            if isinstance(known, Deferred):
                waiter: Deferred[RobotParser | None] = Deferred()
                self._waiters[key].append(waiter)
                return await maybe_deferred_to_future(waiter)
            if not self.policy.expired(self._rules[key], self.clock()):
                return known
            if self._address_dropped(request):  # the politeness gate drops the page: no fetch
                return None
            self.stats.inc_value("larbin/robots/refetched")

        self._site_parsers[key] = Deferred()  # marks "in progress" for known()
        self._waiters[key] = []
        if self._shared is not None:  # another worker may have read it (or be reading it)
            found = await self._shared.claim(key, self.clock, time.time)
            if found is not None:
                self.stats.inc_value("larbin/robots/shared")
                return self._settle(key, found[0], await self._parse_body(found[1], request,
                                                                         key, found[0]))
        before = self._rules.get(key)
        meta: dict[str, Any] = {"dont_obey_robotstxt": True}
        if before is not None and before.errors and self._never_answered(request):
            meta[M.DONT_RETRY] = True  # asked again before the next page anyway
        if M.LEASE in request.meta:
            meta[M.BORROW] = request.meta[M.LEASE]
            meta[M.IP] = request.meta.get(M.IP)
        robotsreq = Request(
            site_origin(key) + "/robots.txt",
            priority=self.DOWNLOAD_PRIORITY,
            meta=meta,
            callback=NO_CALLBACK,
        )
        parser: RobotParser | None = None
        body, share = b"", True
        try:
            response = await self.crawler.engine.download_async(robotsreq)
            rules = self.policy.answered(response.status, self.clock(), before)
            body = response.body
            parser = await self._parse(response, request, key, rules)
        except IgnoreRequest:  # dropped before the server was asked (or too many redirects)
            rules = self.policy.unavailable(self.clock())
            share = False  # this worker's drop says nothing of the site
        except Exception as exc:
            self.stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
            rules = self.policy.answered(None, self.clock(), before,
                                         at_once=self._never_answered(robotsreq))
            parser = self._unreachable(key, rules, str(exc))
        self.stats.inc_value("robotstxt/request_count")
        if self._shared is not None:
            self._shared.store(key, rules, body if share else None, self.clock(), time.time())
        return self._settle(key, rules, parser)

    def _settle(self, key: str, rules: SiteRules, parser: RobotParser | None
                ) -> RobotParser | None:
        """Keep the site's rules and parser, and hand the parser to the requests waiting."""
        self._rules[key] = rules
        self._site_parsers[key] = parser
        for waiter in self._waiters.pop(key):
            waiter.callback(parser)
        return parser

    async def _parse(self, response: Response, request: Request, key: str, rules: SiteRules
                     ) -> RobotParser | None:
        self.stats.inc_value("robotstxt/response_count")
        self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        if rules.verdict != PARSE:
            return self._unreachable(key, rules, f"status {response.status}")
        return await self._parse_body(response.body, request, key, rules)

    async def _parse_body(self, body: bytes, request: Request, key: str, rules: SiteRules
                          ) -> RobotParser | None:
        """The parser of a robots.txt ``body`` read (or shared) under ``rules``."""
        if rules.verdict != PARSE:
            return self._unreachable(key, rules, "as another worker found it")
        parser = build_from_crawler(self.parser_class, self.crawler, body)
        await self.crawler.signals.send_catch_log_async(
            signal=signals.robots_parsed, robotparser=parser, request=request
        )
        self._apply_crawl_delay(parser, urlparse_cached(request).hostname)
        return parser

    def _never_answered(self, request: Request) -> bool:
        """True when the address of ``request`` has never answered this crawl."""
        st = self._ip_state(request)
        return st is not None and not st.answered

    def _address_dropped(self, request: Request) -> bool:
        """True when the request's address was given up (larbin noConnection)."""
        st = self._ip_state(request)
        return st is not None and st.dead

    def _ip_state(self, request: Request) -> IpState | None:
        ip = request.meta.get(M.IP)
        if self._politeness is None or ip is None:
            return None
        return self._politeness.table.ips.get(ip)

    def _unreachable(self, key: str, rules: SiteRules, why: str) -> RobotParser | None:
        """``_DISALLOW_ALL`` for an unreachable robots.txt, None (allow all) otherwise."""
        if rules.verdict != DISALLOW_ALL:
            if rules.errors:
                self.stats.inc_value("larbin/robots/unavailable")
            return None
        logger.debug("robots.txt of %s unreachable (%s): nothing allowed for %.0f s",
                     key, why, rules.expires - self.clock())
        return _DISALLOW_ALL

    def _apply_crawl_delay(self, parser: RobotParser, host: str | None) -> None:
        if not isinstance(parser, ProtegoRobotParser) or host is None or self._politeness is None:
            return
        protego = parser.rp  # Protego reads Crawl-delay; Scrapy's other parsers do not
        agent = self.agent
        delay = protego.crawl_delay(agent)
        if delay:
            hosts = self._politeness.table.hosts
            hosts.set_crawl_delay(hosts.get(host), float(delay))
            self.stats.inc_value("larbin/robots/crawl_delay")
