"""The politeness downloader middleware: Scrapy's side of ``larbinscrapy.politeness.ipsites``,
enforcing per-IP and per-host politeness at send time."""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Coroutine
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse
from urllib.request import getproxies

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import defer, task

from larbinscrapy import meta as M
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.frontier import Frontier, frontier_of
from larbinscrapy.middlewares.pause import PauseGate
from larbinscrapy.politeness import failures
from larbinscrapy.politeness.dns import SsrfGuard, allow_proxy, dns_cache
from larbinscrapy.politeness.hosts import (
    ANSWERED,
    BACKOFF,
    RETRY_AFTER,
    SILENT,
    THROTTLED,
    HostState,
    parse_retry_after,
)
from larbinscrapy.politeness.ipsites import IpState, IpTable, Politeness, PolitenessProvider
from larbinscrapy.politeness.pauses import PauseFile
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.stopping import POLL, drop_held, stopping

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

# A leased request whose host needs this much longer than its IP goes back to the frontier.
REQUEUE_AFTER = 0.05
# Waiters of one IP a wake looks at for one that may start (the rest wait for their timer).
WAKE_SCAN_MAX = 64


class PolitenessMiddleware(PolitenessProvider):
    """Downloader middleware: the host gate and per-IP send-time politeness (module doc)."""

    def __init__(
        self,
        crawler: Crawler,
        politeness: Politeness,
        gauge_interval: float,
        *,
        from_address: str = "",
        autothrottle: bool = False,
        pause_file: PauseFile | None = None,
        download_timeout: float = 180.0,
    ) -> None:
        self.crawler = crawler
        self.download_timeout = download_timeout  # DOWNLOAD_TIMEOUT: a request's own by default
        self.stats = crawler.stats
        self.politeness = politeness
        self.table = politeness.table
        self.hosts = politeness.table.hosts
        self.gauge_interval = gauge_interval
        self.from_address = from_address.encode("latin-1") if from_address else b""
        self.autothrottle = autothrottle
        self.pause_file = pause_file or PauseFile(None)
        self._resume_pauses()
        self._reactor = installed_reactor()
        self._gauge_loop: task.LoopingCall | None = None
        self.table.add_listener(self._wake)
        self._pause_gate: PauseGate | None = None  # the status page's pause, found at open
        self._frontier: Frontier | None = None  # told of a host set aside, found at open
        self._silent_logged = False
        crawler.signals.connect(self._open, signal=signals.spider_opened)
        crawler.signals.connect(self.sample_gauges, signal=signals.spider_idle)
        crawler.signals.connect(self._close, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PolitenessMiddleware:
        s = crawler.settings
        politeness = Politeness(
            IpTable.from_settings(s), crawler.stats, dns_cache(crawler), SsrfGuard.from_settings(s)
        )
        proxies = getproxies() if s.getbool("HTTPPROXY_ENABLED") else {}
        env_proxies = [proxies[scheme] for scheme in ("http", "https") if proxies.get(scheme)]
        for url in env_proxies:  # the operator's proxies: their own address is allowed
            allow_proxy(crawler, urlparse(url).hostname or "")
        politeness.proxied = bool(env_proxies)
        return cls(
            crawler,
            politeness,
            s.getfloat("LARBIN_STATS_INTERVAL"),
            from_address=s.get("LARBIN_FROM") or "",
            autothrottle=s.getbool("AUTOTHROTTLE_ENABLED"),
            pause_file=PauseFile.in_jobdir(s.get("JOBDIR")),
            download_timeout=s.getfloat("DOWNLOAD_TIMEOUT"),
        )

    def _resume_pauses(self) -> None:
        """Pauses a previous run of the job saved: still in force for their host and IP."""
        now = time.time()
        for host, (until, ip) in self.pause_file.load(now).items():
            self.hosts.pause(self.hosts.get(host), until - now)
            self.table.pause(self.table.get(ip), until - now)
            self.stats.inc_value("larbin/throttled/resumed")
            logger.info(
                "%s stays paused for %.1f s (a throttling answer before the resume)",
                host,
                until - now,
            )

    # -- downloader middleware -------------------------------------------------------------
    def process_request(  # a coroutine only for a request that must wait (DNS, a delay)
        self, request: Request, spider: Spider | None = None
    ) -> Coroutine[Any, Any, Request | None] | Request | None:
        meta = request.meta
        proxy = meta.get(M.PROXY)
        if proxy and not self.politeness.proxied:  # a proxy of this request only
            allow_proxy(self.crawler, urlparse(proxy).hostname or "")
        ip = meta.get(M.IP)
        if ip is None:
            return self._resolve_then_send(request)
        try:  # a scheduler resolved it: check again, whatever path it took (memoised)
            self.politeness.check_ip(ip)
        except DroppedRequest as exc:
            self.politeness.count_drop(exc.reason)
            raise
        return self._send(request, ip)

    async def _resolve_then_send(self, request: Request) -> Request | None:
        """The host gate's DNS first (``LARBIN_RESOLVE``, the cache, a lookup), then ``_send``."""
        try:
            d = self.politeness.resolve(urlparse_cached(request).hostname or "")
            ip = request.meta[M.IP] = await maybe_deferred_to_future(d)
        except DroppedRequest as exc:
            self.politeness.count_drop(exc.reason)
            raise
        sent = self._send(request, ip)
        if isinstance(sent, Coroutine):
            await sent
            return None
        return sent

    def _send(self, request: Request, ip: str) -> Coroutine[Any, Any, None] | Request | None:
        """Send now if the IP, the host and the budget allow; else a coroutine that waits."""
        meta = request.meta
        host = urlparse_cached(request).hostname or ""
        hs = self.hosts.get(host)
        if hs.set_aside:
            reason = SILENT if hs.silent else THROTTLED
            self.politeness.count_drop(reason)
            raise DroppedRequest(
                reason,
                f"{host} never answered within LARBIN_HOST_SILENT_TIMEOUT"
                if hs.silent
                else f"{host} asked for a pause past LARBIN_THROTTLE_RETRY_AFTER_MAX",
            )
        meta[M.DOWNLOAD_SLOT] = host
        st = self.table.get(ip)
        # A request the scheduler leased this IP for has its IP connection already, and so has
        # the robots.txt of such a request, wherever its redirects lead (it rides on that lease:
        # waiting for another IP's connection while holding one could hold both for good); any
        # other takes one here.
        own = ip != meta.get(M.LEASE) and M.BORROW not in meta
        if not own and not self._paused() and self._host_lags(st, hs, meta):
            return self._requeue(request)  # (paused: it waits at the pause gate, as others)
        if self._ready_in(st, hs, own=own) != 0.0:
            return self._hold_then_start(request, st, hs, own=own)
        self._start(request, st, hs, own=own)
        return None

    def _start(
        self, request: Request, st: IpState, hs: HostState, *, own: bool, turn: int | None = None
    ) -> None:
        """The request goes: its IP connection, host and bandwidth (its ``turn``) are taken."""
        meta = request.meta
        if own:
            self.table.acquire(st)
            meta[M.OWN] = True
        meta[M.PACER] = self.table.sent(st)
        self.hosts.start(hs)
        self._probe(meta, hs)
        st.last_host = hs.host
        meta[M.BANDWIDTH] = self.table.bandwidth.start(turn)
        meta[M.SENT] = True
        if self.from_address and b"From" not in request.headers:
            request.headers[b"From"] = self.from_address

    def _probe(self, meta: dict[str, Any], hs: HostState) -> None:
        """A host never heard from gets ``LARBIN_HOST_SILENT_TIMEOUT`` for its first answer, the
        request's own page timeout kept aside (``M.PROBE``) until the fetch ends."""
        limit = self.hosts.first_answer_timeout(hs)
        if limit is None:
            return
        own = meta.get(M.DOWNLOAD_TIMEOUT)
        if limit < float(own or self.download_timeout):
            meta[M.PROBE] = own  # None: it had none of its own
            meta[M.DOWNLOAD_TIMEOUT] = limit

    def _silent(self, hs: HostState) -> None:
        """A host's first fetch timed out: set it aside; its other URLs never reach the network.

        Logged for the first host, counted in ``larbin/host/silent``; a shared frontier (Redis)
        tells the other workers.
        """
        if not self.hosts.timed_out(hs):
            return
        self.stats.inc_value("larbin/host/silent")
        if self._frontier is not None:
            self._frontier.host_set_aside(hs.host)
        level = logging.DEBUG if self._silent_logged else logging.INFO
        self._silent_logged = True
        logger.log(
            level,
            "Setting %s aside: it never answered within %g s (LARBIN_HOST_SILENT_TIMEOUT); "
            "further hosts set aside so are counted in larbin/host/silent",
            hs.host,
            self.hosts.silent_timeout,
        )

    def _host_lags(self, st: IpState, hs: HostState, meta: dict[str, Any]) -> bool:
        """True when a leased request would hold its IP idle for its host (after robots.txt).

        Only with a scheduler that waits for hosts itself (``hosts_scheduled``), else the
        request would come straight back.
        """
        if not self.politeness.hosts_scheduled or meta.get(M.LEASE) != st.ip:
            return False
        return self.hosts.next_start(hs.host) > max(st.ready_at, self.table.clock()) + REQUEUE_AFTER

    def _requeue(self, request: Request) -> Request:
        """Give the lease back and the request to the frontier: the IP serves other hosts."""
        self.politeness.lease_returned(
            request.meta.pop(M.LEASE), urlparse_cached(request).hostname or ""
        )
        self.stats.inc_value("larbin/host/requeued")
        return self._back_to_frontier(request)

    def _ready_in(
        self, st: IpState, hs: HostState, *, own: bool, turn: int | None = None
    ) -> float | None:
        """Seconds until the request may go; None while a connection it needs is in use."""
        gate, budget = self._waits(st, hs, own=own, turn=turn)
        if gate is None or budget is None:
            return None
        return max(gate, budget)

    def _waits(
        self, st: IpState, hs: HostState, *, own: bool, turn: int | None
    ) -> tuple[float | None, float | None]:
        """(Seconds until the IP and the host let the request go, until the budget does)."""
        now = self.table.clock()
        if self.hosts.full(hs):
            gate: float | None = None
        elif own:
            gate = self.table.wait(st, now, hs.host)
        else:
            gate = max(0.0, self.table.next_start(st, hs.host) - now)
        return gate, self.table.bandwidth.wait(now, turn)

    async def _hold_then_start(
        self, request: Request, st: IpState, hs: HostState, *, own: bool
    ) -> None:
        """Wait until the IP, the host and the bandwidth budget let the request go, then start
        it; a stop that comes meanwhile ends it unsent.

        A request ready but for the budget takes a turn (``Bandwidth.take``) and keeps it while
        nothing else holds it. A wait on a connection in use (``_ready_in`` None) is ended by
        the IP's listener (``_wake``) when one is given back; its own timer only looks for a
        stop (``POLL``). A wait for a time has its timer at that time (or ``POLL``).
        """
        budget = self.table.bandwidth
        turn: int | None = None
        try:
            while True:
                if stopping(self.crawler):  # nothing new is sent
                    drop_held(self.crawler, request)
                gate, wait = self._waits(st, hs, own=own, turn=turn)
                if gate == 0.0 and wait == 0.0:
                    break
                if gate != 0.0 and turn is not None:
                    budget.give_up(turn)  # not the budget's to hold up: others go first
                    turn = None
                elif gate == 0.0 and wait is not None and turn is None:
                    turn = budget.take()
                    continue
                delay = POLL if gate is None or wait is None else min(max(gate, wait, 0.005), POLL)
                await self._sleep(st, _Held(hs, own=own, turn=turn), delay)
            self._start(request, st, hs, own=own, turn=turn)
            turn = None
        finally:
            if turn is not None:  # stopped, cancelled: the next in line goes
                budget.give_up(turn)
        if st.waiters:  # another connection of the IP may be free for the next waiter
            self._wake(st)

    async def _sleep(self, st: IpState, d: _Held, delay: float) -> None:
        """Wait on ``st``'s list until ``_wake`` picks ``d`` or ``delay`` runs out."""
        st.waiters.append(d)
        timer = self._reactor.callLater(delay, _fire, d)
        await maybe_deferred_to_future(d)
        if timer.active():
            timer.cancel()
        else:  # its own timer woke it: it is still queued
            with contextlib.suppress(ValueError):
                st.waiters.remove(d)

    def _wake(self, st: IpState) -> None:
        """The IP changed (a connection given back...): wake its first waiter that may start
        now. The others sleep on: a waiter woken only to find its host busy would leave the
        connection idle until a timer of its own."""
        waiters = st.waiters
        for i, d in enumerate(itertools.islice(waiters, WAKE_SCAN_MAX)):
            if d.called:
                continue
            if isinstance(d, _Held) and self._ready_in(st, d.hs, own=d.own, turn=d.turn) != 0.0:
                continue
            del waiters[i]
            d.callback(None)
            return

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Request:
        if not request.meta.get(M.SENT):  # not through this gate (a cached answer...)
            self._finished(request, failed=False)
            return response
        hs = self.hosts.get(urlparse_cached(request).hostname or "")
        if self.autothrottle:
            self._adapt(hs)
        retry_after = response.headers.get(b"Retry-After")
        if response.status == HTTPStatus.TOO_MANY_REQUESTS or (
            response.status == HTTPStatus.SERVICE_UNAVAILABLE and retry_after is not None
        ):
            return self._throttled(request, response, hs, retry_after)
        self.hosts.answered(hs)
        self._finished(request, failed=False, nbytes=len(response.body))
        return response

    def _throttled(
        self, request: Request, response: Response, hs: HostState, header: bytes | None
    ) -> Request:
        """Pause the host and its IP, then give the request back to the frontier.

        The pause is set before the lease is given back, so a scheduler that tells others
        (Redis) when the IP is ready again already sees it.
        """
        seconds = parse_retry_after(header, time.time())
        ip = request.meta[M.IP]
        pause = self.politeness.throttled(ip, hs.host, response.status, seconds)
        if pause is None and self._frontier is not None:  # before the lease goes back (Redis)
            self._frontier.host_set_aside(hs.host)
        self._finished(
            request,
            failed=None,
            nbytes=len(response.body),
            outcome=BACKOFF if seconds is None else RETRY_AFTER,
        )
        if pause is None:
            self.politeness.count_drop(THROTTLED)
            raise DroppedRequest(THROTTLED, f"{hs.host} asked for {seconds:.0f} s")
        self.pause_file.record(hs.host, ip, time.time() + pause)
        return self._back_to_frontier(request)

    @staticmethod
    def _back_to_frontier(request: Request) -> Request:
        """A copy the scheduler queues again without the seen test (its bit is already set).

        Not ``dont_filter``: a redirect of the copy would inherit it and skip the seen-set.
        """
        again = request.replace()
        again.meta[M.REQUEUED] = True
        return again

    def _adapt(self, hs: HostState) -> None:
        """AutoThrottle has just set the delay of the host's slot: hold it from the fetch's end."""
        slot = self.crawler.engine.downloader.slots.get(hs.host)
        if slot is not None:
            self.hosts.set_adaptive_delay(hs, slot.delay)

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if isinstance(exception, IgnoreRequest):
            self._finished(request, failed=None)  # refused before it reached the server
            return
        self.stats.inc_value(f"larbin/errors/{type(exception).__name__}")
        self._finished(request, failed=failures.classify(exception))

    def _finished(
        self,
        request: Request,
        *,
        failed: bool | str | None,
        nbytes: int = 0,
        outcome: str | None = None,
    ) -> None:
        """Start the IP's delay after a fetch; give back the connection the request held.

        Every request ends here, whatever middleware ended it (Scrapy calls every
        ``process_response``/``process_exception``), so a lease is never left behind.
        ``outcome`` (``hosts.ANSWERED``...) tells the lease's listener how the host answered;
        by default a normal answer when the request was sent and ``failed`` is False.
        """
        meta = request.meta
        lease = meta.pop(M.LEASE, None)
        host = urlparse_cached(request).hostname or ""
        sent = meta.pop(M.SENT, False)
        probed = _end_probe(meta)
        if outcome is None:
            outcome = ANSWERED if sent and failed is False else ""
        if sent:
            pacer = meta.pop(M.PACER, None)  # told when the request went out (``Pacer``)
            hs = self.hosts.get(host)
            self.hosts.finish(hs, release=True)
            if probed and failed == failures.TIMEOUT:
                self._silent(hs)
            self.table.bandwidth.received(nbytes, meta.pop(M.BANDWIDTH, 0.0))
            self.politeness.fetch_ended(
                meta[M.IP],
                release=meta.pop(M.OWN, False),
                failed=failed,
                retry=bool(meta.get(M.RETRY_TIMES)),
                written=None if pacer is None else pacer.at,
            )
        if lease is not None:
            self.politeness.lease_returned(lease, host, outcome)

    # -- gauges --------------------------------------------------------------------------------
    def sample_gauges(self) -> None:
        """IPs seen, fetching now and cooling down; O(IPs), so sampled, not kept per request."""
        active, cooling = self.table.gauges(self.table.clock())
        self.stats.set_value("larbin/ip/seen", len(self.table.ips))
        self.stats.set_value("larbin/ip/active", active)
        self.stats.set_value("larbin/ip/cooling", cooling)
        for name, count in self.hosts.gauges(self.table.clock()).items():
            self.stats.set_value(f"larbin/host/{name}", count)

    def _paused(self) -> bool:
        return self._pause_gate is not None and self._pause_gate.paused

    def _open(self) -> None:
        self._pause_gate = self.crawler.get_downloader_middleware(PauseGate)
        self._frontier = frontier_of(self.crawler)
        if self.gauge_interval > 0:
            self._gauge_loop = task.LoopingCall(self.sample_gauges)
            self._gauge_loop.start(self.gauge_interval, now=False)

    def _close(self) -> None:
        if self._gauge_loop is not None and self._gauge_loop.running:
            self._gauge_loop.stop()
        self.sample_gauges()


def _end_probe(meta: dict[str, Any]) -> bool:
    """The request's own page timeout again (a retry, a redirect inherit its meta); True if
    the fetch was a first one timed by ``LARBIN_HOST_SILENT_TIMEOUT``."""
    if M.PROBE not in meta:
        return False
    own = meta.pop(M.PROBE)
    if own is None:
        meta.pop(M.DOWNLOAD_TIMEOUT, None)
    else:
        meta[M.DOWNLOAD_TIMEOUT] = own
    return True


class _Held(defer.Deferred[None]):
    """A held request's wake-up, with what it waits for (``_wake`` checks it first)."""

    def __init__(self, hs: HostState, *, own: bool, turn: int | None = None) -> None:
        super().__init__()
        self.hs = hs
        self.own = own
        self.turn = turn


def _fire(d: Deferred[None]) -> None:
    if not d.called:
        d.callback(None)
