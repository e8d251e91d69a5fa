"""larbin's IPSite: per-IP politeness, DNS pinning, slow-IP containment and the SSRF guard.

A downloader middleware placed right before the download handler. For every request it

* resolves the host once through the process's ``DnsCache`` (larbin's NamedSite) and drops the
  request with a counted reason when the name does not resolve (larbin noDNS);
* refuses IPs that are private, loopback, link-local (cloud metadata), multicast or reserved
  unless ``LARBIN_ALLOWED_NETWORKS`` lets them through (``LARBIN_SSRF_GUARD``);
* sets ``meta["download_slot"]`` to the IP, so virtual hosts sharing an IP share one budget;
* holds the request until the IP is free and its delay has passed since the end of the previous
  fetch (larbin waitDuration): politeness is enforced at send time, so CPU load cannot squeeze
  two requests closer than ``DOWNLOAD_DELAY`` at the server;
* backs an IP off after each timeout/refusal and drops it after ``LARBIN_IP_MAX_FAILURES``
  (larbin noConnection), so slow or dead hosts stop hogging connections.

``PageDeadlineHandler`` (the http/https download handler) gives each page larbin's timeout:
``DOWNLOAD_TIMEOUT`` seconds plus one second per ``LARBIN_TIMEOUT_BYTES_PER_SECOND`` bytes
received, which Scrapy's fixed ``download_timeout`` cannot express.

Stats: ``larbin/dns/lookups`` (queries made), ``larbin/dns/failures`` (hostnames that did not
resolve), ``larbin/dropped/<reason>`` (dns, ssrf, noconnection), ``larbin/ip/dropped`` and the
gauges ``larbin/ip/{seen,active,cooling}`` (sampled every ``LARBIN_STATS_INTERVAL`` seconds,
when the crawl goes idle and at close).

The per-IP state lives in ``IpTable``, shared with ``LarbinScheduler``, which only hands out
requests for IPs that are ready (round robin, larbin's okSites): requests it leased carry
``meta["larbin_lease"]``; any other request (robots.txt, a user's ``engine.download``) waits here
for its turn.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import (
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import defer, task
from twisted.internet.error import (
    ConnectError,
    ConnectionLost,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.web._newclient import ResponseFailed

from larbinscrapy.dns import DnsCache, SsrfGuard, dns_cache

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

# Exceptions that say "this IP does not answer well" (larbin noConnection / timeout). Scrapy
# 2.13+ wraps Twisted's errors in its own (DownloadTimeoutError...): both kinds are listed.
_IP_FAILURES = (
    TimeoutError,
    TCPTimedOutError,
    ConnectError,
    ConnectionLost,
    ResponseFailed,
    DownloadTimeoutError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    ResponseDataLossError,
)


@dataclass(slots=True)
class IpState:
    """One server IP (larbin IPSite): connections in use, when it may be used next."""

    ip: str
    busy: int = 0
    ready_at: float = 0.0
    crawl_delay: float = 0.0
    failures: int = 0
    dead: bool = False
    waiters: deque[Deferred[None]] = field(default_factory=deque)


class IpTable:
    """Per-IP politeness state shared by the scheduler (who may go next) and the middleware."""

    def __init__(
        self,
        delay: float,
        max_connections: int = 1,
        *,
        max_failures: int = 3,
        backoff: float = 10.0,
        max_crawl_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default_delay = delay
        self.max_connections = max(1, max_connections)
        self.max_failures = max_failures
        self.backoff = backoff
        self.max_crawl_delay = max_crawl_delay
        self.clock = clock
        self.ips: dict[str, IpState] = {}
        # Called with the IP whenever an IP frees a connection or its readiness changes.
        self.listeners: list[Callable[[IpState], None]] = []

    def get(self, ip: str) -> IpState:
        st = self.ips.get(ip)
        if st is None:
            st = self.ips[ip] = IpState(ip)
        return st

    def delay(self, st: IpState) -> float:
        return max(self.default_delay, st.crawl_delay) + st.failures * self.backoff

    def connections(self, st: IpState) -> int:
        """One connection when a delay applies (larbin); several only for delay-free crawls."""
        return 1 if self.delay(st) > 0 else self.max_connections

    def available(self, st: IpState, now: float) -> bool:
        return not st.dead and st.busy < self.connections(st) and st.ready_at <= now

    def acquire(self, st: IpState) -> None:
        st.busy += 1

    def finish(self, st: IpState, *, release: bool, failed: bool | None) -> None:
        """A fetch on ``st`` ended: start its delay; ``failed`` None means "not the IP's fault"."""
        if release:
            st.busy = max(0, st.busy - 1)
        if failed:
            st.failures += 1
            if st.failures >= self.max_failures:
                st.dead = True
        elif failed is False:
            st.failures = 0
        st.ready_at = max(st.ready_at, self.clock() + self.delay(st))
        self._notify(st)

    def release(self, st: IpState) -> None:
        """Give back a connection leased by the scheduler."""
        st.busy = max(0, st.busy - 1)
        self._notify(st)

    def set_crawl_delay(self, st: IpState, seconds: float) -> None:
        """Raise the IP's delay to a robots.txt Crawl-delay; a pause already started grows too.

        Hostnames sharing the IP share its budget, so the largest Crawl-delay among them holds.
        robots.txt is parsed after its own fetch has started the IP's pause with the old
        delay, so without the shift the next page would follow it at the old delay.
        """
        before = self.delay(st)
        st.crawl_delay = max(st.crawl_delay, min(max(0.0, seconds), self.max_crawl_delay))
        if st.ready_at > 0:
            st.ready_at = max(st.ready_at + self.delay(st) - before, 0.0)
        self._notify(st)

    def gauges(self, now: float) -> tuple[int, int]:
        """(IPs with a fetch in flight, IPs waiting out their delay), dropped IPs excluded."""
        active = cooling = 0
        for st in self.ips.values():
            if st.dead:
                continue
            if st.busy:
                active += 1
            elif st.ready_at > now:
                cooling += 1
        return active, cooling

    def _notify(self, st: IpState) -> None:
        for listener in self.listeners:
            listener(st)


class PolitenessMiddleware:
    """Downloader middleware: DNS pinning, SSRF guard, per-IP send-time politeness."""

    def __init__(
        self,
        crawler: Crawler,
        dns: DnsCache,
        table: IpTable,
        guard: SsrfGuard,
        gauge_interval: float = 10.0,
    ) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.dns = dns
        self.table = table
        self.guard = guard
        self.gauge_interval = gauge_interval
        from twisted.internet import reactor

        self._reactor = reactor
        self._gauge_loop: task.LoopingCall | None = None
        self._refused: dict[str, bool] = {}  # IP -> the SSRF guard's verdict
        table.listeners.append(self._wake)
        crawler.signals.connect(self._open, signal=signals.spider_opened)
        crawler.signals.connect(self.sample_gauges, signal=signals.spider_idle)
        crawler.signals.connect(self._close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PolitenessMiddleware:
        s = crawler.settings
        table = IpTable(
            s.getfloat("DOWNLOAD_DELAY"),
            s.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
            max_failures=s.getint("LARBIN_IP_MAX_FAILURES"),
            backoff=s.getfloat("LARBIN_IP_BACKOFF"),
            max_crawl_delay=s.getfloat("LARBIN_MAX_CRAWL_DELAY"),
        )
        guard = SsrfGuard.from_settings(s)
        return cls(
            crawler,
            dns_cache(crawler),
            table,
            guard,
            s.getfloat("LARBIN_STATS_INTERVAL", 10.0),
        )

    # -- the seam used by the scheduler and the robots middleware -------------------------
    def resolve(self, host: str) -> Deferred[str]:
        """The IP to crawl ``host`` at; fails with IgnoreRequest (counted) if it must not be."""
        before = self.dns.lookups
        d = self.dns.resolve(host)
        if self.dns.lookups != before:  # this call started a query: count it and its failure
            self.stats.inc_value("larbin/dns/lookups")
            d.addErrback(self._count_dns_failure)
        d.addCallbacks(self._check_ip, self._dns_failed)
        return d

    def _count_dns_failure(self, failure: Any) -> Any:
        if failure.check(DNSLookupError):
            self.stats.inc_value("larbin/dns/failures")
        return failure

    def _check_ip(self, ip: str) -> str:
        refused = self._refused.get(ip)
        if refused is None:
            refused = self._refused[ip] = self.guard.refuses(ip)
        if refused:
            raise IgnoreRequest(f"ssrf: {ip} is not a public address")
        if self.table.get(ip).dead:
            raise IgnoreRequest(f"noconnection: {ip} failed too often")
        return ip

    def _dns_failed(self, failure: Any) -> Any:
        failure.trap(DNSLookupError)
        raise IgnoreRequest(f"dns: {failure.getErrorMessage()}")

    def count_drop(self, exc: IgnoreRequest) -> None:
        """Count a drop under ``larbin/dropped/<reason>`` (the text before the colon)."""
        reason = str(exc).split(":", 1)[0]
        self.stats.inc_value(f"larbin/dropped/{reason}")

    # -- downloader middleware -------------------------------------------------------------
    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        ip = meta.get("larbin_ip")
        if ip is None:
            try:
                ip = await maybe_deferred_to_future(
                    self.resolve(urlparse_cached(request).hostname or "")
                )
            except IgnoreRequest as exc:
                self.count_drop(exc)
                raise
            meta["larbin_ip"] = ip
        else:  # a scheduler resolved it: check again, whatever path it took (cheap, memoised)
            try:
                self._check_ip(ip)
            except IgnoreRequest as exc:
                self.count_drop(exc)
                raise
        meta["download_slot"] = ip
        st = self.table.get(ip)
        if ip in (meta.get("larbin_lease"), meta.get("larbin_borrow")):
            # The scheduler leased this IP for the request (or for the request whose robots.txt
            # this is): only wait if a borrowed fetch pushed ready_at forward.
            wait = st.ready_at - self.table.clock()
            if wait > 0:
                await self._sleep(wait)
        else:
            await self._acquire(st)
            meta["larbin_own"] = True
        meta["larbin_sent"] = True

    async def _acquire(self, st: IpState) -> None:
        while not self.table.available(st, self.table.clock()):
            d: Deferred[None] = defer.Deferred()
            st.waiters.append(d)
            wait = st.ready_at - self.table.clock()
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
        self._finished(request, failed=isinstance(exception, _IP_FAILURES))

    def _finished(self, request: Request, *, failed: bool | None) -> None:
        """Start the IP's delay after a fetch; give back the connection the request held.

        Every request ends here, whatever middleware ended it (Scrapy calls every
        ``process_response``/``process_exception``), so a lease is never left behind.
        """
        meta = request.meta
        lease = meta.pop("larbin_lease", None)
        if meta.pop("larbin_sent", False):
            st = self.table.get(meta["larbin_ip"])
            was_dead = st.dead
            self.table.finish(st, release=meta.pop("larbin_own", False), failed=failed)
            if st.dead and not was_dead:
                logger.warning(
                    "Dropping IP %s after %d consecutive failures (larbin noConnection)",
                    st.ip,
                    st.failures,
                )
                self.stats.inc_value("larbin/ip/dropped")
        if lease is not None:
            self.table.release(self.table.get(lease))

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
