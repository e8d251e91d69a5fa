"""larbin's NamedSite robots.txt step, read as RFC 9309 says: fetched once per site (again after
``LARBIN_ROBOTS_TTL``) before any page of the site, and every waiting request checked.

Stats: ``larbin/robots/{unreachable,unavailable,refetched,shared,crawl_delay,gave_up,
lease_returned,moved}`` and
Scrapy's ``robotstxt/*``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, runtime_checkable

from scrapy import signals
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import RobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.defer import Deferred

from larbinscrapy import meta as M
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.frontier import frontier_of
from larbinscrapy.parse.urls import host_of, site_of, site_origin
from larbinscrapy.politeness import robotstxt
from larbinscrapy.politeness.ipsites import IpState, politeness_of
from larbinscrapy.politeness.robotsrules import DISALLOW_ALL, PARSE, RobotsPolicy, SiteRules
from larbinscrapy.politeness.robotstxt import RobotsTxtParser, token_of
from larbinscrapy.stopping import CrawlStopping, drop_held

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


@runtime_checkable
class ReadsCrawlDelay(Protocol):
    """A ``ROBOTSTXT_PARSER`` that reads Crawl-delay (ours and Scrapy's protego parser do)."""

    def crawl_delay(self, user_agent: Any) -> float | None: ...


class RobotsGaveUp(IgnoreRequest):
    """A robots.txt throttled past ``LARBIN_ROBOTS_RETRY_MAX``: the site is disallowed."""


class RobotsUnreachable(Exception):
    """A robots.txt redirected to a host the crawl gave up on: unreachable, not missing."""


class RobotsKnown(IgnoreRequest):
    """A robots.txt redirected to a site whose rules are in hand (``entry``): not fetched."""

    def __init__(self, key: str, entry: Entry) -> None:
        super().__init__(f"robots.txt of {key} is known")
        self.entry = entry


# What decides a site's pages: None (all allowed), ``_DISALLOW_ALL`` (none), a tuple of str
# (``robotstxt.compile_rules``: our parser's compact rules) or a user's ``ROBOTSTXT_PARSER``.
Decider = RobotParser | tuple[str, ...] | None
# A site's state: the fields of its SiteRules, then its Decider. A plain tuple (a NamedTuple is
# never untracked by the cyclic collector, a tuple of atoms and strings is).
Entry = tuple[str, float, int, float | None, Decider]
_EXPIRES: Final = 1
_DECIDER: Final = 4
_RULE_SETS_MAX: Final = 4096  # distinct rule sets shared before the table starts afresh


class RobotsMiddleware(RobotsTxtMiddleware):
    """``RobotsTxtMiddleware`` with per-waiter Deferreds, lease borrowing, Crawl-delay,
    RFC 9309's reading of answers and expiry, and groups chosen by the product token.

    A site's state is one tuple (``Entry``) of atoms and strings, so an idle
    site costs bytes the cyclic collector does not walk; ``forget(key)`` drops it. At most
    ``LARBIN_ROBOTS_RESIDENT_MAX`` sites are kept, the least recently used forgotten first.
    """

    def __init__(
        self,
        crawler: Crawler,
        policy: RobotsPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(crawler)
        # our own state, never the parent's private attributes (they are Scrapy's to change)
        settings = crawler.settings
        self.stats = crawler.stats
        self.agent: str = token_of(settings)  # the product token (RFC 9309 section 2.2.1)
        self.parser_class: type[RobotParser] = load_object(settings["ROBOTSTXT_PARSER"])
        self._compact = issubclass(self.parser_class, RobotsTxtParser)
        self._sites: dict[str, Entry] = {}
        self._rule_sets: dict[tuple[str, ...], tuple[str, ...]] = {}  # see _shared_rules
        self.policy = policy or RobotsPolicy.from_settings(crawler.settings)
        self.clock = clock
        self._resident_max = settings.getint("LARBIN_ROBOTS_RESIDENT_MAX")
        self._waiters: dict[str, list[Deferred[Decider]]] = {}  # sites being read
        self._fetching: dict[str, float] = {}  # site -> when its robots.txt fetch began
        self._gave_up_logged = False
        self._politeness: HostRegistry | None = None
        self._shared: RobotsCache | None = None  # Redis workers: the rules all workers share
        crawler.signals.connect(self._find_politeness, signal=signals.spider_opened)

    def _find_politeness(self) -> None:
        self._politeness = politeness_of(self.crawler)
        frontier = frontier_of(self.crawler)
        self._shared = None if frontier is None else frontier.robots  # Redis workers

    def known(self, key: str) -> bool:
        """True once the robots.txt of the site ``key`` (``site_key``) is read."""
        return key in self._sites and key not in self._waiters

    def forget(self, key: str) -> bool:
        """Drop the rules of the idle site ``key`` (read again before its next page); False
        while its robots.txt is being read (nothing dropped)."""
        if key in self._waiters:
            return False
        return self._sites.pop(key, None) is not None

    def process_request(  # type: ignore[override]  # None at once: no coroutine to await
        self, request: Request, spider: Spider | None = None
    ) -> Coroutine[Any, Any, None] | None:
        """A site's rules in hand are applied at once; a coroutine only while they are read."""
        if request.meta.get("dont_obey_robotstxt"):
            self._check_throttled(request)
            if M.ROBOTS_FOR in request.meta and M.REDIRECT_URLS in request.meta:
                self._check_known(request.url)
            return None
        url = request.url
        if url.startswith(("data:", "file:")):
            return None
        key = site_key(url)
        sites = self._sites
        entry = sites.get(key)
        if entry is None or key in self._waiters or self.clock() >= entry[_EXPIRES]:
            if self._checked_already(request):
                return None
            return super().process_request(request)
        sites[key] = sites.pop(key)  # the most recently used: the last to be forgotten
        self._decide(entry[_DECIDER], request)
        return None

    def process_request_2(self, rp: Decider, request: Request) -> None:
        """The decision once the site's rules were read (or waited for), marked on an allowed
        request (``M.ROBOTS_CHECKED``) until the rules' end: a page given back to wait for its
        host comes back past a cache that may have forgotten the rules meanwhile (a broad
        crawl may read hundreds of robots.txt in one host's delay), and reading them again
        would start that wait again, for good."""
        self._decide(rp, request)
        entry = self._sites.get(site_key(request.url))
        if entry is not None:
            ends = time.time() + entry[_EXPIRES] - self.clock()
            request.meta[M.ROBOTS_CHECKED] = [request.url, ends]

    @staticmethod
    def _checked_already(request: Request) -> bool:
        """True when this very URL was allowed by its site's rules, and they are still valid."""
        checked = request.meta.get(M.ROBOTS_CHECKED)
        if not checked:
            return False
        return bool(checked[0] == request.url and time.time() < checked[1])

    def _decide(self, rp: Decider, request: Request) -> None:
        """Let ``request`` through or raise ``IgnoreRequest``, as ``rp`` says."""
        if rp is None:
            return
        if rp is _DISALLOW_ALL:
            self.stats.inc_value("larbin/robots/unreachable")
            logger.debug("robots.txt unreachable, page not fetched: %s", request)
            raise IgnoreRequest("robots.txt unreachable (RFC 9309: complete disallow)")
        if isinstance(rp, tuple):
            ok = robotstxt.allowed(rp, robotstxt.path_of(request.url))
        else:
            ok = rp.allowed(request.url, self.agent)
        if not ok:
            logger.debug("Forbidden by robots.txt: %s", request)
            self.stats.inc_value("robotstxt/forbidden")
            raise IgnoreRequest("Forbidden by robots.txt")

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        """A robots.txt hop to another host, dropped on its way (that host's name failed, its
        address or the host itself was given up), leaves the file unreachable (RFC 9309
        section 2.3.1.4: complete disallow). The site's own pages are not dropped with that
        host, so "not read" must not read as "no rules". A drop on the site's own host stays
        a drop: its pages go the same way, counted under the same reason."""
        key = request.meta.get(M.ROBOTS_FOR)
        if key is None or not isinstance(exception, DroppedRequest):
            return
        if urlparse_cached(request).hostname == host_of(key):
            return
        raise RobotsUnreachable(f"robots.txt of {key} moved to {request.url}: {exception}")

    def _check_known(self, url: str) -> None:
        """A robots.txt redirected to a site whose rules are in hand is not fetched: that
        site's answer is the one the redirect leads to (``RobotsKnown``)."""
        key = site_key(url)
        entry = self._sites.get(key)
        if entry is None or key in self._waiters or url != site_origin(key) + "/robots.txt":
            return
        if entry[2] or entry[_DECIDER] is _DISALLOW_ALL or self.clock() >= entry[_EXPIRES]:
            return  # failing or expired: asked again
        raise RobotsKnown(key, entry)

    def _check_throttled(self, request: Request) -> None:
        """A robots.txt given back by a throttling pause (429...) goes again only while the
        wait stays within ``LARBIN_ROBOTS_RETRY_MAX`` of its first try."""
        if not request.meta.get(M.REQUEUED):
            return
        key = site_key(request.url)
        started = self._fetching.get(key)
        if started is None:
            return
        wait = 0.0
        if self._politeness is not None:
            table = self._politeness.table
            host = urlparse_cached(request).hostname or ""
            wait = max(0.0, table.hosts.next_start(host) - table.clock())
        if self.policy.give_up(started, self.clock(), wait):
            raise RobotsGaveUp(f"robots.txt of {key} throttled past LARBIN_ROBOTS_RETRY_MAX")

    async def robot_parser(self, request: Request) -> Decider:  # type: ignore[override]
        key = site_key(request.url)
        if key in self._waiters:  # being read
            self._return_lease(request)
            waiter: Deferred[Decider] = Deferred()
            self._waiters[key].append(waiter)
            try:
                return await maybe_deferred_to_future(waiter)
            except CrawlStopping:  # its read was cut by a stop: this page too, record kept
                drop_held(self.crawler, request)
        entry = self._sites.get(key)
        if entry is not None:
            if self.clock() < entry[_EXPIRES]:  # RobotsPolicy.expired
                return entry[_DECIDER]
            if self._address_dropped(request):  # the politeness gate drops the page: no fetch
                return None
            self.stats.inc_value("larbin/robots/refetched")
        self._waiters[key] = []  # marks "in progress" for known()
        before = SiteRules(entry[0], entry[1], entry[2], entry[3]) if entry is not None else None
        if self._shared is not None:  # another worker may have read it (or be reading it)
            found = await self._shared.claim(key, self.clock, time.time)
            if found is not None:
                self.stats.inc_value("larbin/robots/shared")
                return self._settle(
                    key, found[0], await self._parse_body(found[1], request, key, found[0])
                )
        self._fetching[key] = self.clock()
        try:
            rules, parser, body, moved = await self._fetch(request, key, before)
        except CrawlStopping:  # not read: the site keeps what it had, the resume reads it
            for waiter in self._waiters.pop(key):
                waiter.errback(CrawlStopping("the crawl is stopping: robots.txt not read"))
            drop_held(self.crawler, request)
        finally:
            self._fetching.pop(key, None)
        self.stats.inc_value("robotstxt/request_count")
        if self._shared is not None:
            self._shared.store(key, rules, body, self.clock(), time.time())
        return self._settle(key, rules, parser, moved)

    def _return_lease(self, request: Request) -> None:
        """A leased request waiting for a robots.txt another request is reading gives its IP
        connection back first: the read may need that very connection (a sitemap redirected
        to a new site has no lease to lend its robots.txt), and holding it would stall the IP
        for good. The request then takes a connection at the politeness gate, as others."""
        if self._politeness is None or M.LEASE not in request.meta:
            return  # (no send-time gate: the lease goes back when the request leaves)
        host = urlparse_cached(request).hostname or ""
        self._politeness.lease_returned(request.meta.pop(M.LEASE), host)
        self.stats.inc_value("larbin/robots/lease_returned")

    async def _fetch(
        self, request: Request, key: str, before: SiteRules | None
    ) -> tuple[SiteRules, Decider, bytes | None, list[str]]:
        """Fetch and read the site's robots.txt: its rules, decider, the body to share, and
        the sites its redirects went through that the answer serves too (``_moved_to``)."""
        robotsreq = self._robots_request(request, key, before)
        try:
            response = await self.crawler.engine.download_async(robotsreq)
            rules = self.policy.answered(response.status, self.clock(), before)
            moved = [] if rules.errors else self._moved_to(key, response)
            parser = await self._parse(response, request, key, rules, moved)
            return rules, parser, response.body, moved
        except CrawlStopping:
            raise
        except RobotsKnown as known:  # redirected to a site read already: its rules
            self.stats.inc_value("larbin/robots/moved_known")
            entry = known.entry
            return SiteRules(*entry[:_DECIDER]), entry[_DECIDER], None, []
        except RobotsGaveUp as exc:
            rules = self.policy.gave_up(self.clock(), before)
            self._log_gave_up(key, str(exc))
            return rules, _DISALLOW_ALL, b"", []
        except IgnoreRequest:  # dropped before the server was asked (or too many redirects)
            return self.policy.unavailable(self.clock()), None, None, []  # nothing of the site
        except Exception as exc:
            self.stats.inc_value(f"robotstxt/exception_count/{type(exc)}")
            rules = self.policy.answered(
                None, self.clock(), before, at_once=self._never_answered(robotsreq)
            )
            return rules, self._unreachable(key, rules, str(exc)), b"", []

    def _robots_request(self, request: Request, key: str, before: SiteRules | None) -> Request:
        """The fetch of ``key``'s robots.txt, on the lease of the page ``request`` if it has one."""
        meta: dict[str, Any] = {"dont_obey_robotstxt": True, M.ROBOTS_FOR: key}
        if before is not None and before.errors and self._never_answered(request):
            meta[M.DONT_RETRY] = True  # asked again before the next page anyway
        if M.LEASE in request.meta:
            meta[M.BORROW] = request.meta[M.LEASE]
            meta[M.IP] = request.meta.get(M.IP)
        url = site_origin(key) + "/robots.txt"
        return Request(url, priority=self.DOWNLOAD_PRIORITY, meta=meta, callback=NO_CALLBACK)

    def _moved_to(self, key: str, response: Response) -> list[str]:
        """The sites whose own robots.txt the redirects of ``key``'s went through, nothing of
        them known yet (``http://h`` moved to ``https://h``, a bare name to ``www``): the
        answer is their robots.txt too, so none is asked again (RFC 9309 section 2.3.1.2
        applies it to ``key``). The final site is the last. Only between a name and its
        ``www`` form: a file elsewhere says nothing of what the crawl will meet."""
        hops = [*response.meta.get(M.REDIRECT_URLS, ())[1:], response.url]
        host = host_of(key)
        moved: list[str] = []
        for url in hops:
            site = site_key(url)
            if site == key or url != site_origin(site) + "/robots.txt" or site in moved:
                continue
            if site in self._sites or site in self._waiters:
                continue
            other = host_of(site)
            if other == host or other == "www." + host or host == "www." + other:
                moved.append(site)
        return moved

    def _log_gave_up(self, key: str, why: str) -> None:
        """Log the first site given up at INFO, the others at DEBUG; count them all."""
        self.stats.inc_value("larbin/robots/gave_up")
        level = logging.DEBUG if self._gave_up_logged else logging.INFO
        self._gave_up_logged = True
        logger.log(
            level,
            "%s: its pages are not fetched for %.0f s (further ones counted in "
            "larbin/robots/gave_up)",
            why,
            self.policy.ttl,
        )

    def _settle(
        self, key: str, rules: SiteRules, parser: Decider, moved: list[str] | None = None
    ) -> Decider:
        """Keep the site's rules and decider, and hand the decider to the requests waiting;
        the same for the sites its robots.txt ``moved`` to (``_moved_to``) not read since,
        which share the one entry (most sites of a broad crawl moved: a name, not a copy)."""
        entry: Entry = (rules.verdict, rules.expires, rules.errors, rules.failing_since, parser)
        for site in moved or ():
            if site not in self._waiters and site not in self._sites:
                self._waiters[site] = []
                self._keep(site, entry)
                self.stats.inc_value("larbin/robots/moved")
        self._keep(key, entry)
        return parser

    def _keep(self, key: str, entry: Entry) -> None:
        """``key``'s entry, the most recently used; its waiting requests told its decider."""
        self._sites.pop(key, None)
        self._sites[key] = entry
        if len(self._sites) > self._resident_max:
            self._evict()
        for waiter in self._waiters.pop(key):
            waiter.callback(entry[_DECIDER])

    def _evict(self) -> None:
        """Forget the least recently used half of the sites' rules: a broad crawl meets a
        million sites, each read once for its few pages, and RFC 9309 lets rules live a day.
        A site met again reads its robots.txt again; a failing one (errors, a back-off, all
        disallowed) keeps its state, so forgetting never shortens a back-off."""
        excess = len(self._sites) - self._resident_max // 2
        kept: dict[str, Entry] = {}
        for key, entry in self._sites.items():
            failing = entry[2] or entry[3] is not None or entry[_DECIDER] is _DISALLOW_ALL
            if excess > 0 and not failing and key not in self._waiters:
                excess -= 1
                continue
            kept[key] = entry
        self.stats.inc_value("larbin/robots/evicted", len(self._sites) - len(kept))
        self._sites = kept

    async def _parse(
        self,
        response: Response,
        request: Request,
        key: str,
        rules: SiteRules,
        moved: list[str] | None = None,
    ) -> Decider:
        self.stats.inc_value("robotstxt/response_count")
        self.stats.inc_value(f"robotstxt/response_status_count/{response.status}")
        if rules.verdict != PARSE:
            return self._unreachable(key, rules, f"status {response.status}")
        final = site_key(response.url)
        return await self._parse_body(response.body, request, key, rules, moved, final)

    async def _parse_body(
        self,
        body: bytes,
        request: Request,
        key: str,
        rules: SiteRules,
        moved: list[str] | None = None,
        final: str | None = None,
    ) -> Decider:
        """What decides the pages of a robots.txt ``body`` read (or shared) under ``rules``:
        our parser's compact rules, or the user's parser itself. ``robots_parsed`` names the
        site whose file it is: the ``final`` site ``key``'s redirects ``moved`` to, none when
        that site was known already (its sitemaps are read there, not through redirects)."""
        if rules.verdict != PARSE:
            return self._unreachable(key, rules, "as another worker found it")
        parser = build_from_crawler(self.parser_class, self.crawler, body)
        for host in {urlparse_cached(request).hostname, *map(host_of, moved or ())}:
            self._apply_crawl_delay(parser, host)  # before the signal: a sitemap read on it
        told: Request | None = request
        if final is not None and final != key:  # redirected elsewhere
            told = None
            if moved and moved[-1] == final:
                told = Request(
                    site_origin(final) + "/robots.txt",
                    callback=NO_CALLBACK,
                    meta=self._lendable(request, final),
                )
        if told is not None:
            await self.crawler.signals.send_catch_log_async(
                signal=signals.robots_parsed, robotparser=parser, request=told
            )
        if self._compact:
            return self._shared_rules(cast("RobotsTxtParser", parser).rules)
        return parser

    @staticmethod
    def _lendable(request: Request, final: str) -> dict[str, Any]:
        """What ``robots_parsed`` tells of the page's lease for the ``final`` site its
        robots.txt moved to: the lease to borrow (the page waits for this read), and the IP
        when the final site is on the page's host (another host is looked up as itself)."""
        meta: dict[str, Any] = {}
        if M.LEASE in request.meta:
            meta[M.BORROW] = request.meta[M.LEASE]
            if host_of(final) == urlparse_cached(request).hostname:
                meta[M.IP] = request.meta.get(M.IP)
        return meta

    def _shared_rules(self, rules: tuple[str, ...]) -> tuple[str, ...]:
        """One tuple for every site with the same rules: most sites of a broad crawl serve one
        of a few robots.txt files, and each site's rules are kept for its whole life."""
        shared = self._rule_sets.get(rules)
        if shared is not None:
            return shared
        if len(self._rule_sets) >= _RULE_SETS_MAX:  # rules seen once each: start afresh
            self._rule_sets.clear()
        self._rule_sets[rules] = rules
        return rules

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

    def _unreachable(self, key: str, rules: SiteRules, why: str) -> Decider:
        """``_DISALLOW_ALL`` for an unreachable robots.txt, None (allow all) otherwise."""
        if rules.verdict != DISALLOW_ALL:
            if rules.errors:
                self.stats.inc_value("larbin/robots/unavailable")
            return None
        logger.debug(
            "robots.txt of %s unreachable (%s): nothing allowed for %.0f s",
            key,
            why,
            rules.expires - self.clock(),
        )
        return _DISALLOW_ALL

    def _apply_crawl_delay(self, parser: RobotParser, host: str | None) -> None:
        if not isinstance(parser, ReadsCrawlDelay) or host is None or self._politeness is None:
            return
        delay = parser.crawl_delay(self.agent)
        if delay:
            hosts = self._politeness.table.hosts
            hosts.set_crawl_delay(hosts.get(host), float(delay))
            self.stats.inc_value("larbin/robots/crawl_delay")
