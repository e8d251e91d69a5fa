"""larbin's IPSite and the host gate: per-IP politeness state, and who may be fetched at all
(pure: the clock is passed in).

Per-IP state is bounded as the host level's is (``hosts`` module docstring): past
``LARBIN_IP_RESIDENT_MAX`` IPs the oldest ones nothing holds are evicted, forgotten when their
state is a new IP's, else kept as a tuple of plain values (untracked by the cyclic garbage
collector) until asked for again. Dropped IPs and IPs failing without ever answering stay
resident: the robots middleware reads those in ``ips`` directly.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from twisted.internet import defer
from twisted.internet.error import DNSLookupError

from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.politeness import failures
from larbinscrapy.politeness.dns import is_ip
from larbinscrapy.politeness.hosts import Bandwidth, HostTable

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from larbinscrapy.politeness import HostRegistry
    from larbinscrapy.politeness.dns import DnsCache, SsrfGuard

logger = logging.getLogger(__name__)

# Drop reasons (``DroppedRequest.reason``, the ``larbin/dropped/<reason>`` stat).
DNS = "dns"  # the hostname does not resolve (larbin noDNS)
SSRF = "ssrf"  # the address is not public and not in LARBIN_ALLOWED_NETWORKS
NOCONNECTION = "noconnection"  # the IP failed LARBIN_IP_FAILURES_MAX times in a row

Listener = Callable[["IpState"], None]
# (state, the host the connection was leased for or "", how its fetch ended: hosts.ANSWERED...)
ReleaseListener = Callable[["IpState", str, str], None]


class Stats(Protocol):
    """What the core needs of Scrapy's stats collector."""

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


@dataclass(slots=True)
class IpState:
    """One server IP (larbin IPSite): connections in use, when it may be used next."""

    ip: str
    busy: int = 0
    ready_at: float = 0.0
    failures: int = 0  # consecutive failures that say "gone" (larbinscrapy.politeness.failures)
    dead: bool = False
    answered: bool = False  # a server answered here once: it may come back, back off long
    strikes: int = 0  # consecutive failures of single URLs (timeouts, resets): back-off only
    recent: deque[bool] = field(default_factory=deque)  # last outcomes, True = failed
    recent_failed: int = 0  # how many of ``recent`` failed
    last_host: str | None = None  # the hostname of the last fetch sent (a release's host level)
    # requests the send-time gate holds until the IP is free (the middleware's Deferreds)
    waiters: deque[Deferred[None]] = field(default_factory=deque)


# ready_at, failures, dead, answered, strikes, recent outcomes (bits, oldest lowest), their
# number, last_host: an evicted IpState (``IpTable._evict``)
Packed = tuple[float, int, bool, bool, int, int, int, str | None]
_UNHELD = 3  # references to a state in _evict: the table's, the loop's, getrefcount's
RESIDENT_MAX = 10_000  # the default of LARBIN_IP_RESIDENT_MAX


def pack_ip(st: IpState, now: float) -> Packed | None:
    """``st`` as plain values; None when it is a new IP's state at ``now``.

    A window of successes only is kept as none: it judges the next failure the same way.
    """
    recent = bits = 0
    if st.recent_failed:
        recent = len(st.recent)
        for n, failed in enumerate(st.recent):
            bits |= failed << n
    ready_at = st.ready_at if st.ready_at > now else 0.0
    if not (ready_at or st.failures or st.dead or st.answered or st.strikes or recent):
        return None
    return (ready_at, st.failures, st.dead, st.answered, st.strikes, bits, recent, st.last_host)


def unpack_ip(ip: str, packed: Packed) -> IpState:
    ready_at, failures, dead, answered, strikes, bits, recent, last_host = packed
    window = deque(bool(bits >> n & 1) for n in range(recent))
    return IpState(
        ip, 0, ready_at, failures, dead, answered, strikes, window, sum(window), last_host
    )


class Pacer:
    """Called by the HTTP handler when a request's bytes go to the connection (``meta[PACER]``):
    the IP's next request waits the delay from then, so a new connection's connect time never
    shortens the gap the server sees, however many connections the IP has."""

    __slots__ = ("at", "st", "table")

    def __init__(self, table: IpTable, st: IpState) -> None:
        self.table = table
        self.st = st
        self.at: float | None = None  # when it was written; None: not by a handler that says

    def __call__(self, at: float) -> None:
        self.at = at
        self.table.written(self.st, at)


class IpTable:
    """Per-IP politeness state shared by the scheduler (who goes next) and the send-time gate."""

    def __init__(
        self,
        delay: float,
        max_connections: int,
        *,
        max_failures: int,
        backoff: float,
        failure_window: int = 1,  # with the rate 0: every URL failure backs off (a bare table)
        failure_rate: float = 0.0,
        hosts: HostTable | None = None,
        bandwidth: Bandwidth | None = None,
        clock: Callable[[], float] = time.monotonic,
        resident_max: int = RESIDENT_MAX,
        from_start: bool = False,  # the delay paces the requests (``sent``, ``finish``)
    ) -> None:
        self.default_delay = delay
        self.from_start = from_start
        self.max_connections = max(1, max_connections)
        self.max_failures = max_failures
        self.backoff = backoff
        self.failure_window = max(1, failure_window)
        self.failure_rate = failure_rate
        self.clock = clock
        # without a host level (a bare table in a unit test) no host delay applies
        self.hosts = hosts or HostTable(
            0.0,
            max_crawl_delay=0.0,
            max_retry_after=0.0,
            throttle_backoff=0.0,
            max_backoff=0.0,
            clock=clock,
        )
        self.bandwidth = bandwidth or Bandwidth(0.0, clock)
        self.ips: dict[str, IpState] = {}  # resident, oldest first
        self.packed: dict[str, Packed] = {}  # evicted IPs whose state is not a new IP's
        self.resident_max = max(1, resident_max)
        self.created = 0  # IP states made new (an IP forgotten and back counts again)
        self._listeners: list[Listener] = []
        self._release_listeners: list[ReleaseListener] = []

    @classmethod
    def from_settings(cls, settings: Any, *, local: bool = False) -> IpTable:
        """The table for Scrapy ``settings`` (read by the caller's ``from_crawler``).

        ``local``: for a scheduler without the send-time gate, where the host is the IP: the
        IP then follows the host settings (``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS_PER_DOMAIN``).
        The IP delay is never longer than the host delay, so ``DOWNLOAD_DELAY = 0`` means no
        delay at all, as in Scrapy.
        """
        host_delay = settings.getfloat("DOWNLOAD_DELAY")
        host_connections = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        if local:
            return cls(
                host_delay,
                host_connections,
                **cls._failure_settings(settings),
                resident_max=settings.getint("LARBIN_IP_RESIDENT_MAX"),
            )
        hosts = HostTable(
            host_delay,
            resident_max=settings.getint("LARBIN_HOST_RESIDENT_MAX"),
            max_connections=host_connections,
            max_crawl_delay=settings.getfloat("LARBIN_ROBOTS_CRAWL_DELAY_MAX"),
            max_retry_after=settings.getfloat("LARBIN_THROTTLE_RETRY_AFTER_MAX"),
            throttle_backoff=settings.getfloat("LARBIN_THROTTLE_BACKOFF"),
            max_backoff=settings.getfloat("LARBIN_THROTTLE_BACKOFF_MAX"),
            max_in_a_row=settings.getint("LARBIN_THROTTLE_IN_A_ROW_MAX"),
            silent_timeout=settings.getfloat("LARBIN_HOST_SILENT_TIMEOUT"),
        )
        return cls(
            min(settings.getfloat("LARBIN_IP_DELAY"), host_delay),
            settings.getint("LARBIN_IP_CONNECTIONS"),
            **cls._failure_settings(settings),
            hosts=hosts,
            bandwidth=Bandwidth(settings.getfloat("LARBIN_BANDWIDTH_MAX")),
            resident_max=settings.getint("LARBIN_IP_RESIDENT_MAX"),
            from_start=True,
        )

    @staticmethod
    def _failure_settings(settings: Any) -> dict[str, Any]:
        return {
            "max_failures": settings.getint("LARBIN_IP_FAILURES_MAX"),
            "backoff": settings.getfloat("LARBIN_IP_BACKOFF"),
            "failure_window": settings.getint("LARBIN_IP_FAILURE_WINDOW"),
            "failure_rate": settings.getfloat("LARBIN_IP_FAILURE_RATE"),
        }

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(state)`` whenever an IP frees a connection or its readiness changes."""
        self._listeners.append(listener)

    def add_release_listener(self, listener: ReleaseListener) -> None:
        """Call ``listener(state, host, outcome)`` after a connection leased by the scheduler
        is given back (``release``)."""
        self._release_listeners.append(listener)

    def get(self, ip: str) -> IpState:
        st = self.ips.get(ip)
        if st is None:
            packed = self.packed.pop(ip, None)
            if packed is None:
                st = IpState(ip)
                self.created += 1
            else:
                st = unpack_ip(ip, packed)
            self.ips[ip] = st
            if len(self.ips) > self.resident_max:
                self._evict()
        return st

    def _evict(self) -> None:
        """Evict the oldest IPs nothing holds, down to three quarters of the cap."""
        now = self.clock()
        excess = len(self.ips) - self.resident_max * 3 // 4
        ips, packed = self.ips, self.packed
        for ip in list(ips):
            if excess <= 0:
                break
            st = ips[ip]
            if st.busy or st.waiters or sys.getrefcount(st) > _UNHELD:
                continue
            if st.dead or (st.failures and not st.answered):  # asked of ``ips`` directly
                continue
            del ips[ip]
            excess -= 1
            state = pack_ip(st, now)
            if state is not None:
                packed[ip] = state

    def delay(self, st: IpState) -> float:
        return self.default_delay + self.backoff_of(st)

    def backoff_of(self, st: IpState) -> float:
        """``LARBIN_IP_BACKOFF`` per consecutive failure, but none for the refusals of an IP
        that never answered: it is gone, and its URLs must not hold the crawl's end open.

        A URL's failure (``strikes``) backs off only while the IP's recent failure rate is high
        (``failing``): one broken section must not slow the site's good pages.
        """
        gone = st.failures if st.answered else 0
        strikes = min(st.strikes, self.max_failures) if self.failing(st) else 0
        return (gone + strikes) * self.backoff

    def failing(self, st: IpState) -> bool:
        """More than ``failure_rate`` of the last ``failure_window`` outcomes failed (counted
        against a full window, so a few early failures are not a rate)."""
        return st.recent_failed > self.failure_rate * self.failure_window

    def connections(self, st: IpState) -> int:
        """``LARBIN_IP_CONNECTIONS``: the fetches one IP may have open at once."""
        return self.max_connections

    # -- the question both the scheduler and the send-time gate ask ------------------------
    def next_start(self, st: IpState, host: str | None = None) -> float:
        """When (clock time) the next request for ``host`` on ``st`` may start, by delays only.

        With ``host``, the host's delay and pause count too (``HostTable.next_start``); the
        scheduler's ``IpRing`` asks it for the site it picks, the send-time gate for the request.
        """
        if host is None:
            return st.ready_at
        return max(st.ready_at, self.hosts.next_start(host))

    def wait(self, st: IpState, now: float, host: str | None = None) -> float | None:
        """Seconds until a new request for ``host`` may take a connection of ``st``.

        None when time alone will not do: the IP is dropped, or every connection it may have
        is in use (a listener hears when one is given back).
        """
        if st.dead or st.busy >= self.connections(st):
            return None
        return max(0.0, self.next_start(st, host) - now)

    def available(self, st: IpState, now: float, host: str | None = None) -> bool:
        return self.wait(st, now, host) == 0.0

    # -- changes ------------------------------------------------------------------------------
    def acquire(self, st: IpState) -> None:
        st.busy += 1

    def sent(self, st: IpState) -> Pacer | None:
        """A fetch goes out to ``st`` (the send-time gate): with ``from_start``, the next may
        start ``LARBIN_IP_DELAY`` from now at the soonest, and later from when this one is
        written (the ``Pacer`` returned, for the HTTP handler). The server then gets at most
        one request per delay whatever its latency, which one connection would otherwise add
        to every gap."""
        if not self.from_start:
            return None
        st.ready_at = max(st.ready_at, self.clock() + self.default_delay)
        return Pacer(self, st)

    def written(self, st: IpState, at: float) -> None:
        """A request to ``st`` reached its connection at ``at``: no other before the delay."""
        st.ready_at = max(st.ready_at, at + self.default_delay)

    def finish(
        self,
        st: IpState,
        *,
        release: bool,
        failed: bool | str | None,
        retry: bool = False,
        written: float | None = None,
    ) -> None:
        """A fetch on ``st`` ended: set when the next may start, count its outcome
        (``count_outcome``).

        With ``from_start`` the next start is the delay after ``written``, when the request
        reached the connection (the connect time must not shorten the gap the server sees);
        a back-off, a fetch not known to have been written, or a table without
        ``from_start`` rests the IP from the end of the fetch.
        """
        if release:
            st.busy = max(0, st.busy - 1)
        self.count_outcome(st, failed, retry=retry)
        if self.from_start and written is not None and not self.backoff_of(st):
            self.written(st, written)  # the pacer's, once more when a caller gives the time
        else:
            st.ready_at = max(st.ready_at, self.clock() + self.delay(st))
        self._notify(st)

    def count_outcome(self, st: IpState, failed: bool | str | None, *, retry: bool = False) -> None:
        """Whose failure it was (``failures``), and drop the IP once it is gone.

        ``failed``: False, an answer (any status: a server is there, every count is cleared);
        None, not the IP's fault; a ``GONE`` kind (or True), counted toward
        ``LARBIN_IP_FAILURES_MAX``; a ``URL`` kind, a strike (back-off) only: a reset or a
        malformed answer also proves a server is there, a timeout of an IP that never answered
        is as good as gone. A ``retry`` of a URL says nothing new about the site: it stays out
        of the recent failure rate (``failing``).
        """
        if failed is None:
            return
        if not retry:
            self._remember(st, failed is not False)
        if failed is False:
            st.failures = st.strikes = 0
            st.answered = True
            return
        if failed is True or failed in failures.GONE:
            st.failures += 1
        else:
            st.strikes += 1
            if failed in failures.ALIVE:  # a server is there: what looked gone was not
                st.answered = True
                st.failures = 0
            elif not st.answered:
                st.failures += 1
        if st.failures >= self.max_failures:
            st.dead = True

    def _remember(self, st: IpState, failed: bool) -> None:
        """Slide the IP's window of recent outcomes (``failing``)."""
        st.recent.append(failed)
        st.recent_failed += failed
        if len(st.recent) > self.failure_window:
            st.recent_failed -= st.recent.popleft()

    def release(self, st: IpState, host: str = "", outcome: str = "") -> None:
        """Give back a connection leased by the scheduler for ``host``, whose fetch ended as
        ``outcome`` says (``hosts.ANSWERED``...)."""
        st.busy = max(0, st.busy - 1)
        self._notify(st)
        for listener in self._release_listeners:
            listener(st, host, outcome)

    def pause(self, st: IpState, seconds: float) -> None:
        """A throttling answer came from ``st``: no fetch starts there for ``seconds``."""
        st.ready_at = max(st.ready_at, self.clock() + seconds)
        self._notify(st)

    def gauges(self, now: float) -> tuple[int, int]:
        """(IPs with a fetch in flight, IPs waiting out their delay), dropped IPs excluded
        (resident IPs only: an evicted one has neither)."""
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
        for listener in self._listeners:
            listener(st)


class Politeness:
    """The crawl's politeness core: the ``IpTable`` and the host gate (module docstring).

    ``dns`` None is the local form: the host is its own IP and nothing is refused.
    """

    def __init__(
        self,
        table: IpTable,
        stats: Stats,
        dns: DnsCache | None = None,
        guard: SsrfGuard | None = None,
    ) -> None:
        self.table = table
        self.stats = stats
        self.dns = dns
        self.guard = guard
        self._refused: dict[str, bool] = {}  # IP -> the SSRF guard's verdict
        # True when the scheduler picks requests by host readiness too (LarbinScheduler): a
        # leased request whose host must still wait (after its robots.txt) can go back to it
        # instead of holding the IP's connection idle meanwhile.
        self.hosts_scheduled = False
        # True when every request goes through a proxy (HTTP_PROXY/HTTPS_PROXY): targets are
        # not resolved, the "IP" of a host is its name, and only IP literals meet the guard.
        self.proxied = False
        self._logged_reasons: set[str] = set()
        if dns is not None:  # each lookup's outcome, hit and retry: larbin/dns/<event>
            dns.add_listener(self._count_dns_event)
        self._prefetched = ""  # the last host prefetch() saw (links mostly repeat their host)

    @classmethod
    def local(cls, table: IpTable, stats: Stats) -> Politeness:
        """Host-as-IP politeness for a scheduler that runs without the send-time gate."""
        return cls(table, stats)

    # -- the host gate ------------------------------------------------------------------------
    def resolve(self, host: str, *, ahead: bool = False) -> Deferred[str]:
        """The IP to crawl ``host`` at; fails with ``DroppedRequest`` if it must not be.
        ``ahead``: asked before the host's turn (``prefetch``)."""
        if self.dns is None:
            return defer.succeed(host)
        if self.proxied and not is_ip(host):
            try:
                return defer.succeed(self.check_ip(host))
            except DroppedRequest:
                return defer.fail()
        before = self.dns.lookups
        d = self.dns.resolve(host, ahead=ahead)
        if self.dns.lookups != before:  # this call started a query: count it and its failure
            self.stats.inc_value("larbin/dns/lookups")
            d.addErrback(self._count_dns_failure)
        d.addCallbacks(self.check_ip, self._dns_failed)
        return d

    def prefetch(self, host: str) -> None:
        """Start resolving ``host`` now, ahead of its turn (larbin: DNS once per site when its
        first URL enters the frontier); the answer, or the failure, waits in the cache."""
        if self.dns is None or self.proxied or host == self._prefetched:
            return
        self._prefetched = host
        if (
            self.dns.cached(host) is False and not self.dns.in_flight(host) and self.dns.has_room()
        ):  # else at its turn, as any host
            # counted when its turn comes
            self.resolve(host, ahead=True).addErrback(lambda _: None)

    def _count_dns_event(self, event: str) -> None:
        self.stats.inc_value(f"larbin/dns/{event}")

    def cached_ip(self, host: str) -> str | None:
        """The IP of ``host`` if this process already resolved it (no waiting, no lookup):
        asked for a host's turn, so a name asked ahead (``prefetch``) counts as used."""
        if self.dns is None:
            return host
        answer = self.dns.cached(host, turn=True)
        return answer if isinstance(answer, str) else None

    def check_ip(self, ip: str) -> str:
        """``ip`` if a request may go there; ``DroppedRequest`` (ssrf, noconnection) if not."""
        if self.guard is not None and (not self.proxied or is_ip(ip)):
            refused = self._refused.get(ip)
            if refused is None:
                refused = self._refused[ip] = self.guard.refuses(ip)
            if refused:
                raise DroppedRequest(SSRF, f"{ip} is not a public address")
        if self.table.get(ip).dead:
            raise DroppedRequest(NOCONNECTION, f"{ip} failed too often")
        return ip

    def _count_dns_failure(self, failure: Failure) -> Failure:
        if failure.check(DNSLookupError):
            self.stats.inc_value("larbin/dns/failures")
        return failure

    def _dns_failed(self, failure: Failure) -> Any:
        failure.trap(DNSLookupError)
        raise DroppedRequest(DNS, failure.getErrorMessage())

    # -- drops --------------------------------------------------------------------------------
    def count_drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` requests dropped under ``larbin/dropped/<reason>``."""
        if count:
            self.stats.inc_value(f"larbin/dropped/{reason}", count)

    def host_dropped(self, host: str, failure: Failure) -> str:
        """A host's URLs are being dropped: log the first host per reason; return the reason.

        A failure that is not a ``DroppedRequest`` (a bug in a resolver) is logged in full
        and counted as ``dns``, so a site never stays waiting for an answer forever.
        """
        if isinstance(failure.value, DroppedRequest):
            reason = failure.value.reason
        else:
            logger.error("Resolving %s failed: %s", host, failure.getErrorMessage())
            reason = DNS
        if reason not in self._logged_reasons:  # log the first one, count them all
            self._logged_reasons.add(reason)
            logger.warning(
                "Dropping the URLs of %s: %s (further hosts dropped for this reason "
                "are counted in larbin/dropped/%s)",
                host,
                failure.value,
                reason,
            )
        return reason

    # -- the end of a fetch -------------------------------------------------------------------
    def fetch_ended(
        self,
        ip: str,
        *,
        release: bool,
        failed: bool | str | None,
        retry: bool = False,
        written: float | None = None,
    ) -> None:
        """A request sent to ``ip`` ended: set the IP's next start, drop the IP if it keeps
        failing.

        ``release``: the request held a connection the send-time gate acquired itself;
        ``written``: when its bytes went to the connection (``IpTable.finish``).
        """
        st = self.table.get(ip)
        was_dead = st.dead
        self.table.finish(st, release=release, failed=failed, retry=retry, written=written)
        if st.dead and not was_dead:
            logger.warning(
                "Dropping IP %s after %d consecutive failures (larbin noConnection)",
                st.ip,
                st.failures,
            )
            self.stats.inc_value("larbin/ip/dropped")

    def throttled(self, ip: str, host: str, status: int, retry_after: float | None) -> float | None:
        """A throttling answer: pause ``host`` and its IP; the pause, or None if set aside.

        Counted in ``larbin/throttled/<status>``; the first answer of each host is logged.
        """
        self.stats.inc_value(f"larbin/throttled/{status}")
        hs = self.table.hosts.get(host)
        first = hs.throttled == 0
        pause = self.table.hosts.throttle(hs, retry_after)
        if pause is None:
            self.stats.inc_value("larbin/host/set_aside")
            self._log_set_aside(host, status, hs.in_a_row, retry_after)
            return None
        self.table.pause(self.table.get(ip), pause)
        if first:
            logger.info(
                "%s answered %d: pausing it and its IP %s for %.1f s (%s); further "
                "throttling answers are counted in larbin/throttled/%d",
                host,
                status,
                ip,
                pause,
                "Retry-After" if retry_after is not None else "back-off",
                status,
            )
        return pause

    def _log_set_aside(
        self, host: str, status: int, in_a_row: int, retry_after: float | None
    ) -> None:
        if in_a_row >= self.table.hosts.max_in_a_row > 0:
            logger.warning(
                "Setting %s aside: it answered %d (throttling) %d times in a row "
                "(LARBIN_THROTTLE_IN_A_ROW_MAX)",
                host,
                status,
                in_a_row,
            )
        else:
            logger.warning(
                "Setting %s aside: it answered %d with Retry-After %.0f s, more "
                "than LARBIN_THROTTLE_RETRY_AFTER_MAX",
                host,
                status,
                retry_after or 0.0,
            )

    def lease_returned(self, ip: str, host: str = "", outcome: str = "") -> None:
        """Give back the connection the scheduler leased on ``ip`` (for ``host``, its fetch
        ended as ``outcome`` says: ``IpTable.release``)."""
        self.table.release(self.table.get(ip), host, outcome)


class PolitenessProvider:
    """Base of the downloader component that enforces ``politeness`` at send time.

    It also gives back the scheduler's leases when a request leaves the downloader.
    """

    politeness: HostRegistry


def politeness_of(crawler: Any) -> HostRegistry | None:
    """The crawl's enforced ``Politeness``, or None without an engine or without a provider."""
    try:
        provider = crawler.get_downloader_middleware(PolitenessProvider)
    except RuntimeError:  # no engine: a component built on its own (unit tests)
        return None
    return None if provider is None else provider.politeness
