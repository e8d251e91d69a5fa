"""The politeness downloader middleware: Scrapy's side of ``larbinscrapy.politeness``.

Placed right before the download handler. For every request it

* resolves the host through the host gate (``Politeness.resolve``: DNS, SSRF guard, dead IP)
  unless a scheduler already did, and drops the request with a counted reason otherwise;
* sets ``meta["download_slot"]`` to the IP, so virtual hosts sharing an IP share one budget;
* holds the request until the IP is free and its delay has passed since the end of the previous
  fetch (larbin waitDuration): politeness is enforced at send time, so CPU load cannot squeeze
  two requests closer than ``DOWNLOAD_DELAY`` at the server;
* when the request ends, starts the IP's delay, tells the core whose failure it was
  (``larbinscrapy.failures``: a refusal is the IP's, a timeout or reset one URL's) and gives
  back the connection the scheduler leased.

Requests a scheduler leased carry ``meta[LEASE]`` (or ``meta[BORROW]``, robots.txt on the lease
of the page that needs it) and only wait out a delay; any other request (a user's
``engine.download``) first takes a connection of its IP here (``meta[OWN]``).

Settings: ``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS_PER_DOMAIN``, ``LARBIN_IP_MAX_FAILURES``,
``LARBIN_IP_BACKOFF``, ``LARBIN_MAX_CRAWL_DELAY``, ``LARBIN_SSRF_GUARD``,
``LARBIN_ALLOWED_NETWORKS``, ``LARBIN_STATS_INTERVAL``. Stats: those of the core, plus
``larbin/errors/<exception>`` and the gauges ``larbin/ip/{seen,active,cooling}`` (sampled every
``LARBIN_STATS_INTERVAL`` seconds, when the crawl goes idle and at close).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import defer, task

from larbinscrapy import failures
from larbinscrapy import meta as M
from larbinscrapy.dns import SsrfGuard, dns_cache
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.politeness import IpState, IpTable, Politeness, PolitenessProvider

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)


class PolitenessMiddleware(PolitenessProvider):
    """Downloader middleware: the host gate and per-IP send-time politeness (module doc)."""

    def __init__(self, crawler: Crawler, politeness: Politeness, gauge_interval: float) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.politeness = politeness
        self.table = politeness.table
        self.gauge_interval = gauge_interval
        from twisted.internet import reactor

        self._reactor: Any = reactor  # the installed reactor (typed as the module by mypy)
        self._gauge_loop: task.LoopingCall | None = None
        self.table.add_listener(self._wake)
        crawler.signals.connect(self._open, signal=signals.spider_opened)
        crawler.signals.connect(self.sample_gauges, signal=signals.spider_idle)
        crawler.signals.connect(self._close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PolitenessMiddleware:
        s = crawler.settings
        politeness = Politeness(
            IpTable.from_settings(s), crawler.stats, dns_cache(crawler), SsrfGuard.from_settings(s)
        )
        return cls(crawler, politeness, s.getfloat("LARBIN_STATS_INTERVAL"))

    # -- downloader middleware -------------------------------------------------------------
    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        try:
            ip = await self._ip_of(request)
        except DroppedRequest as exc:
            self.politeness.count_drop(exc.reason)
            raise
        meta[M.DOWNLOAD_SLOT] = ip
        st = self.table.get(ip)
        host = urlparse_cached(request).hostname
        if ip in (meta.get(M.LEASE), meta.get(M.BORROW)):
            # The scheduler leased this IP for the request (or for the request whose robots.txt
            # this is): only wait if a borrowed fetch pushed the next start forward.
            wait = self.table.next_start(st, host) - self.table.clock()
            if wait > 0:
                await self._sleep(wait)
        else:
            await self._acquire(st, host)
            meta[M.OWN] = True
        meta[M.SENT] = True

    async def _ip_of(self, request: Request) -> str:
        """The IP ``request`` goes to, through the host gate (``DroppedRequest`` if none)."""
        ip: str | None = request.meta.get(M.IP)
        if ip is not None:  # a scheduler resolved it: check again, whatever path it took
            return self.politeness.check_ip(ip)
        host = urlparse_cached(request).hostname or ""
        resolved: str = await maybe_deferred_to_future(self.politeness.resolve(host))
        request.meta[M.IP] = resolved
        return resolved

    async def _acquire(self, st: IpState, host: str | None) -> None:
        while not self.table.available(st, self.table.clock(), host):
            d: Deferred[None] = defer.Deferred()
            st.waiters.append(d)
            wait = self.table.next_start(st, host) - self.table.clock()
            timer = self._reactor.callLater(max(wait, 0.05), self._wake, st)
            await maybe_deferred_to_future(d)
            if timer.active():
                timer.cancel()
        self.table.acquire(st)

    def _wake(self, st: IpState) -> None:
        while st.waiters:
            d = st.waiters.popleft()
            if not d.called:
                d.callback(None)
                return

    async def _sleep(self, seconds: float) -> None:
        d: Deferred[None] = defer.Deferred()
        self._reactor.callLater(seconds, d.callback, None)
        await maybe_deferred_to_future(d)

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        self._finished(request, failed=False)
        return response

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if isinstance(exception, IgnoreRequest):
            self._finished(request, failed=None)  # refused before it reached the server
            return
        self.stats.inc_value(f"larbin/errors/{type(exception).__name__}")
        self._finished(request, failed=failures.classify(exception))

    def _finished(self, request: Request, *, failed: bool | str | None) -> None:
        """Start the IP's delay after a fetch; give back the connection the request held.

        Every request ends here, whatever middleware ended it (Scrapy calls every
        ``process_response``/``process_exception``), so a lease is never left behind.
        """
        meta = request.meta
        lease = meta.pop(M.LEASE, None)
        if meta.pop(M.SENT, False):
            self.politeness.fetch_ended(
                meta[M.IP], release=meta.pop(M.OWN, False), failed=failed
            )
        if lease is not None:
            self.politeness.lease_returned(lease)

    # -- gauges --------------------------------------------------------------------------------
    def sample_gauges(self) -> None:
        """IPs seen, fetching now and cooling down; O(IPs), so sampled, not kept per request."""
        active, cooling = self.table.gauges(self.table.clock())
        self.stats.set_value("larbin/ip/seen", len(self.table.ips))
        self.stats.set_value("larbin/ip/active", active)
        self.stats.set_value("larbin/ip/cooling", cooling)

    def _open(self) -> None:
        if self.gauge_interval > 0:
            self._gauge_loop = task.LoopingCall(self.sample_gauges)
            self._gauge_loop.start(self.gauge_interval, now=False)

    def _close(self) -> None:
        if self._gauge_loop is not None and self._gauge_loop.running:
            self._gauge_loop.stop()
        self.sample_gauges()
