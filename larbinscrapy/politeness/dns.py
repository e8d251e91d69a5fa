"""larbin's ``fetchDns``: each hostname resolved once, asynchronously (c-ares on the reactor,
``resolver.py``), kept for its TTL, and pinned for the download (``PinnedResolver``)."""

from __future__ import annotations

import ipaddress
import itertools
import json
import logging
import sys
import time
import warnings
import weakref
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

from larbinscrapy.politeness.resolver import (
    ANSWERED,
    ERROR,
    TEMPORARY,
    TIMEOUT,
    Answer,
    AresResolver,
    DnsError,
    hosts_file,
)
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.settings import BaseSettings
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)


def parse_resolve(value: Any) -> dict[str, str]:
    """``LARBIN_RESOLVE`` as a dict: a dict, a JSON object, or ``"host:ip,host:ip"``."""
    if not value:
        return {}
    if isinstance(value, str):
        value = value.strip()
        if value.startswith("{"):
            value = json.loads(value)
        else:
            value = dict(item.strip().rsplit(":", 1) for item in value.split(",") if item.strip())
    if not isinstance(value, Mapping):
        raise ValueError(f"LARBIN_RESOLVE must be a mapping of host to IP, got {value!r}")
    resolved = {}
    for host, ip in value.items():
        ipaddress.ip_address(ip)  # ValueError names the bad address
        resolved[str(host).lower()] = str(ip)
    return resolved


def is_ip(host: str) -> bool:
    """True for an IPv4 or IPv6 literal (brackets allowed)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def parse_networks(
    value: str | list[str],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``LARBIN_ALLOWED_NETWORKS``: comma-separated CIDRs (or a list)."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in items if v.strip())


def parse_servers(value: str | list[str]) -> tuple[str, ...]:
    """``LARBIN_DNS_SERVERS``: comma-separated nameservers, ``ip``, ``ip:port``, ``[v6]:port``."""
    items = value.split(",") if isinstance(value, str) else value
    servers = tuple(v.strip() for v in items if v.strip())
    for server in servers:
        host = server.rsplit(":", 1)[0] if server.count(":") == 1 else server
        if host.startswith("["):
            host = host[1:].split("]", 1)[0]
        ipaddress.ip_address(host)  # ValueError names the bad address
    return servers


class SsrfGuard:
    """Which resolved IPs a crawl may connect to: public unicast ones, plus ``allowed``."""

    def __init__(self, enabled: bool = True, allowed: tuple[Any, ...] = ()) -> None:
        self.enabled = enabled
        self.allowed = allowed
        # proxy hostnames the crawl was told to use (HTTP_PROXY, meta["proxy"]): the operator
        # chose them, so their own address is allowed whatever network it is in
        self.proxies: set[str] = set()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SsrfGuard:
        return cls(
            settings.getbool("LARBIN_SSRF_GUARD"),
            parse_networks(settings.get("LARBIN_ALLOWED_NETWORKS") or ""),
        )

    def refuses(self, ip: str) -> bool:
        if not self.enabled:
            return False
        addr = ipaddress.ip_address(ip)
        if any(addr in net for net in self.allowed):
            return False
        return not addr.is_global or addr.is_multicast or addr.is_reserved


Lookup = Callable[[str], "Deferred[Answer | str]"]


class DnsRules(NamedTuple):
    """How long answers and failures are kept, how often and how many names are asked."""

    ttl: float  # answers that carry none: overrides, the hosts file, a bare IP
    ttl_min: float
    ttl_max: float
    negative_ttl: float
    timeout: float
    retries: int
    retry_delay: float
    lossy_retries: int
    max_in_flight: int
    servers: tuple[str, ...]
    max_cnames: int
    max_entries: int


class DnsCache:
    """``host -> IP`` for the crawl (larbin's ``fetchDns``), the one place names are looked up.

    An answer is kept for its own TTL, bounded by ``ttl_min``/``ttl_max`` (``ttl`` for answers
    that carry none: overrides, the hosts file, a bare IP from ``lookup``); a failure is kept
    ``negative_ttl`` seconds (RFC 2308). A temporary failure (``resolver.TEMPORARY``, or no
    answer within ``timeout``) is asked again ``retries`` times, ``retry_delay`` doubling,
    before the name counts as failed; ``lossy_retries`` times more, the delay doubling on,
    while the resolver is seen losing answers (``LOSSY_WINDOW``). One query per name in
    flight; at most ``max_in_flight`` at once, the others wait their turn (the timeout starts
    when a query is sent). At most ``max_entries`` names are kept: past that the older half
    goes (``evicted``) but names asked ahead and not yet used (``has_room``), whatever their
    TTL, and a name met again is asked again (a broad crawl
    meets a million hosts an hour, most of them once; a name's answer is needed while its few
    pages are fetched). Listeners (``add_listener``) hear each outcome: ``larbin/dns/<event>``
    in ``Politeness``.
    """

    def __init__(
        self,
        reactor: Any,
        *,
        ttl: float = 3600,
        ttl_min: float = 0.0,
        ttl_max: float = float("inf"),
        negative_ttl: float | None = None,
        timeout: float = 10,
        retries: int = 0,
        retry_delay: float = 2.0,
        lossy_retries: int = 0,
        max_in_flight: int = 256,
        overrides: Mapping[str, str] | None = None,
        hosts: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        lookup: Lookup | None = None,
        servers: Sequence[str] = (),
        max_cnames: int = 8,
        max_entries: int = 100_000,
    ) -> None:
        self._reactor = reactor
        self._lookup = lookup  # None: an AresResolver, made at the first lookup
        negative = ttl if negative_ttl is None else negative_ttl
        times = (ttl, ttl_min, ttl_max, negative, timeout, retries, retry_delay, lossy_retries)
        limits = (max(1, max_in_flight), tuple(servers), max_cnames, max(1, max_entries))
        self.rules = DnsRules(*times, *limits)
        self._overrides, self._hosts = dict(overrides or {}), dict(hosts or {})  # both pinned
        self._clock = clock
        self._entries: dict[str, tuple[float, str | None, str]] = {}  # (expiry, ip or None, why)
        self._purge_at = min(_PURGE_MIN, self.rules.max_entries)
        self._inflight: dict[str, list[Deferred[str]]] = {}  # asked for, answer not yet given
        self._ahead: set[str] = set()  # asked ahead of their turn, not asked since (has_room)
        self._waiting: deque[tuple[str, int]] = deque()  # (host, attempt) over the cap
        self._sent = 0  # queries sent and not yet answered
        self._recovered_at = float("-inf")  # the last answer to a name asked again (clock)
        # weak: the cache lives as long as the process, a crawl's Politeness as long as its crawl
        self._listeners: list[weakref.WeakMethod[Callable[[str], None]]] = []
        self.lookups = self.failures = 0  # names looked up (overrides included), names failed
        self.resolver: AresResolver | None = None

    @classmethod
    def from_settings(cls, settings: BaseSettings, reactor: Any) -> DnsCache:
        ttl_min = settings.getfloat("LARBIN_DNS_TTL_MIN")
        ttl_max = settings.getfloat("LARBIN_DNS_TTL_MAX")
        fixed = settings.getfloat("LARBIN_DNS_TTL")
        if fixed:  # the deprecated fixed TTL: every answer kept exactly that long
            warnings.warn(
                "LARBIN_DNS_TTL is deprecated: answers keep their own TTL within "
                "LARBIN_DNS_TTL_MIN and LARBIN_DNS_TTL_MAX",
                DeprecationWarning,
                stacklevel=2,
            )
            ttl_min = ttl_max = fixed
        return cls(
            reactor,
            ttl=max(ttl_min, min(ttl_max, _UNKNOWN_TTL)),
            ttl_min=ttl_min,
            ttl_max=ttl_max,
            negative_ttl=settings.getfloat("LARBIN_DNS_NEGATIVE_TTL"),
            timeout=settings.getfloat("DNS_TIMEOUT"),
            retries=settings.getint("LARBIN_DNS_RETRIES"),
            retry_delay=settings.getfloat("LARBIN_DNS_RETRY_DELAY"),
            lossy_retries=settings.getint("LARBIN_DNS_LOSSY_RETRIES"),
            max_in_flight=settings.getint("LARBIN_DNS_IN_FLIGHT_MAX"),
            overrides=parse_resolve(settings.get("LARBIN_RESOLVE")),
            hosts=hosts_file(),
            servers=parse_servers(settings.get("LARBIN_DNS_SERVERS") or ""),
            max_cnames=settings.getint("LARBIN_DNS_CNAME_MAX"),
            max_entries=settings.getint("LARBIN_DNS_CACHE_MAX"),
        )

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """Call the bound method ``listener(event)`` for each outcome, cache hit and retry (the
        stats), as long as its object lives."""
        self._listeners.append(weakref.WeakMethod(listener))

    def _event(self, event: str) -> None:
        gone = False
        for ref in self._listeners:
            listener = ref()
            if listener is None:  # its crawl is over
                gone = True
            else:
                listener(event)
        if gone:
            self._listeners = [ref for ref in self._listeners if ref() is not None]

    def cached(self, host: str, *, turn: bool = False) -> str | bool | None:
        """The cached answer without waiting: an IP, None (known failure), False (unknown).
        ``turn``: the host's turn takes it (a name asked ahead is then used, as by
        ``resolve``)."""
        name = host.lower()
        if turn and self._ahead:
            self._ahead.discard(name)
        entry = self._entries.get(name)
        if entry is None:  # an IP literal is never an entry: tested only here (it is costly)
            return host.strip("[]") if is_ip(host) else False
        if entry[0] < self._clock():
            return False
        return entry[1]

    def pinned(self, host: str) -> str | None:
        """The last address ``resolve`` gave for ``host``, expired or not (None: none known).

        The download connects there: the address the politeness and SSRF checks saw, even
        when its TTL ran out between the check and the connection.
        """
        entry = self._entries.get(host.lower())
        return None if entry is None else entry[1]

    def has_room(self) -> bool:
        """True while a name may be asked for ahead of its turn (``Politeness.prefetch``):
        fewer lookups in flight than four times the cap on queries, so a seeds list of
        millions of hosts holds no million pending lookups, and fewer names asked ahead and
        not yet used than a quarter of the table, so none is forgotten before its turn (the
        rest are looked up at their turn). The table's purges keep those names: a crawl that
        admits more hosts than it holds would forget their answers before it needs them."""
        asking = len(self._inflight) < 4 * self.rules.max_in_flight
        return asking and len(self._ahead) < max(1, self.rules.max_entries // 4)

    def in_flight(self, host: str) -> bool:
        """True while ``host`` is being looked up (sent, waiting its turn or backing off)."""
        return host.lower() in self._inflight

    def resolve(self, host: str, *, ahead: bool = False) -> Deferred[str]:
        """The IP of ``host``; fails with ``DNSLookupError`` (``DnsError`` says why).

        ``ahead``: asked for before the host's turn (the answer is kept for it, within the
        table's room: ``has_room``); any other call is the turn.
        """
        host = host.lower()
        if ahead:
            self._ahead.add(host)
        elif self._ahead:
            self._ahead.discard(host)
        entry = self._entries.get(host)
        if entry is not None and entry[0] >= self._clock():
            self._event("cached")
            if entry[1] is not None:
                return defer.succeed(entry[1])
            return defer.fail(DnsError(host, f"{entry[2]} (cached)"))
        if entry is None and is_ip(host):
            return defer.succeed(host.strip("[]"))
        d: Deferred[str] = defer.Deferred()
        waiters = self._inflight.get(host)
        if waiters is not None:
            waiters.append(d)
            return d
        self._inflight[host] = [d]
        self.lookups += 1
        pinned = self._overrides.get(host) or self._hosts.get(host)
        if pinned is not None:
            self._reactor.callLater(0, self._done, host, pinned, self.rules.ttl)
            return d
        self._send(host, 0)
        return d

    def _send(self, host: str, attempt: int) -> None:
        """Ask for ``host`` now, or queue it behind the cap on queries in flight."""
        if self._sent >= self.rules.max_in_flight:
            self._waiting.append((host, attempt))
            return
        self._sent += 1
        try:
            query = self._lookup_function()(host)
        except Exception as exc:  # a resolver that cannot start (no nameserver configured...)
            query = defer.fail(DnsError(host, f"{ERROR} ({exc})"))
        query.addTimeout(self.rules.timeout, self._reactor)
        query.addCallbacks(
            self._answered, self._failed, callbackArgs=(host, attempt), errbackArgs=(host, attempt)
        )

    def _lookup_function(self) -> Lookup:
        if self._lookup is None:
            self.resolver = AresResolver(
                self._reactor,
                servers=self.rules.servers,
                max_cnames=self.rules.max_cnames,
                in_flight=self.rules.max_in_flight,
            )
            self._lookup = cast("Lookup", self.resolver.lookup)
        return self._lookup

    def _next_query(self) -> None:
        self._sent -= 1
        if self._waiting and self._sent < self.rules.max_in_flight:
            self._send(*self._waiting.popleft())

    def _answered(self, answer: Answer | str, host: str, attempt: int) -> None:
        self._next_query()
        if attempt:  # a try of it failed: the resolver loses answers (or did, for this name)
            self._recovered_at = self._clock()
        if isinstance(answer, str):
            answer = Answer(answer, self.rules.ttl)
        self._event(ANSWERED)
        if answer.cnames:
            self._event("cname")
        if ":" in answer.ip:
            self._event("ipv6")
        # interned: the thousands of names on one shared address keep one string of it
        ip = sys.intern(answer.ip)
        self._done(host, ip, max(self.rules.ttl_min, min(self.rules.ttl_max, answer.ttl)))

    def _failed(self, failure: Failure, host: str, attempt: int) -> None:
        self._next_query()
        exc = failure.value
        if isinstance(exc, DnsError):
            outcome = exc.outcome
        elif isinstance(exc, defer.TimeoutError | DNSLookupError):
            outcome = TIMEOUT if isinstance(exc, defer.TimeoutError) else "failed"
        else:  # a bug in a lookup function: one line, counted, the name fails
            logger.error("DNS lookup of %s failed unexpectedly: %r", host, exc)
            outcome = ERROR
        if outcome in TEMPORARY and attempt < self._tries_again(outcome):
            self._event("retried")
            if attempt >= self.rules.retries:  # one of the extra tries of a lossy resolver
                self._event("lossy_retried")
            delay = self.rules.retry_delay * 2**attempt
            self._reactor.callLater(delay, self._send, host, attempt + 1)
            return
        self._event(outcome)
        logger.debug("DNS lookup of %s failed: %s", host, outcome)
        self._done(host, None, self.rules.negative_ttl, outcome)

    def _tries_again(self, outcome: str) -> int:
        """How many times a name that failed for now is asked again before it counts as failed.

        ``retries``; for a timeout, ``lossy_retries`` more while another name was answered on
        a later try in the last ``LOSSY_WINDOW`` seconds. An overloaded resolver (a broad
        crawl's own bursts, a busy upstream) drops queries: a live name can go unanswered at
        every try of a short series, and the host was dropped as a DNS failure although its
        own name never failed. A resolver that loses nothing gives no such answer, and a name
        that never answers costs its ``retries`` alone, as before; a SERVFAIL is an answer.
        """
        if outcome == TIMEOUT and self._clock() - self._recovered_at < LOSSY_WINDOW:
            return self.rules.retries + self.rules.lossy_retries
        return self.rules.retries

    def _done(self, host: str, ip: str | None, ttl: float, outcome: str = "") -> None:
        now = self._clock()
        self._entries.pop(host, None)  # a name answered again is the newest (what stays)
        self._entries[host] = (now + ttl, ip, outcome)
        if len(self._entries) >= self._purge_at:
            self._purge(now)
        if ip is None:
            self.failures += 1
        for waiter in self._inflight.pop(host, ()):
            if ip is None:
                waiter.errback(DnsError(host, outcome))
            else:
                waiter.callback(ip)

    def _purge(self, now: float) -> None:
        """Forget expired answers, then the older half when ``max_entries`` are still kept.

        Runs when the table doubled since the last purge, or reached ``max_entries``: its cost
        is amortised O(1) per lookup, and memory is bounded by ``max_entries`` names.
        """
        entries = {h: e for h, e in self._entries.items() if e[0] >= now}
        ahead = self._ahead
        if ahead:  # an expired answer is asked for again at its turn
            self._ahead = ahead = {h for h in ahead if h in entries or h in self._inflight}
        cap = self.rules.max_entries
        if len(entries) >= cap:
            keep = cap // 2
            old = len(entries) - keep
            kept = {h: e for h, e in itertools.islice(entries.items(), old) if h in ahead}
            for _ in range(old - len(kept)):
                self._event("evicted")
            kept.update(itertools.islice(entries.items(), old, None))
            entries = kept
        self._entries = entries
        self._purge_at = min(cap, max(_PURGE_MIN, 2 * len(entries)))

    def __len__(self) -> int:
        return len(self._entries)


_PURGE_MIN = 10_000  # entries before the first purge of expired answers
# Seconds a resolver counts as losing answers after a name was answered on a later try of it:
# longer than a name's whole series of tries at the default delays (5 + 10 s, and the tries).
LOSSY_WINDOW = 600.0
_UNKNOWN_TTL = 3600.0  # an answer without a TTL (an override, the hosts file), within bounds


@implementer(IResolverSimple)
class PinnedResolver:
    """Twisted's resolver for the process (``TWISTED_DNS_RESOLVER``), answering from a DnsCache.

    Scrapy builds it once per process with the process settings; crawler components reach the
    same cache through ``dns_cache(crawler)``. It also applies the SSRF guard, as a last line:
    whatever path a request took (a redirect, a request no scheduler saw, a cache entry that
    expired and was looked up again), no connection is made to a refused address.
    """

    def __init__(self, reactor: Any, cache: DnsCache, guard: SsrfGuard | None = None) -> None:
        self.reactor = reactor
        self.cache = cache
        self.guard = guard or SsrfGuard(enabled=False)

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> PinnedResolver:
        settings = crawler.settings
        return cls(
            reactor, DnsCache.from_settings(settings, reactor), SsrfGuard.from_settings(settings)
        )

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        ip = self.cache.pinned(name)
        if ip is not None:  # what the checks saw (a lookup only for a name none of them saw)
            return defer.maybeDeferred(self._check, ip, name)
        return self.cache.resolve(name).addCallback(self._check, name)

    def _check(self, ip: str, name: str) -> str:
        if name not in self.guard.proxies and self.guard.refuses(ip):
            raise DNSLookupError(f"{name}: {ip} refused by the SSRF guard")
        return ip


def allow_proxy(crawler: Any, hostname: str) -> None:
    """Let connections to the proxy ``hostname`` through the process resolver's SSRF guard."""
    dns_cache(crawler)  # installs the resolver if no one did
    installed_reactor().resolver.guard.proxies.add(hostname)


def dns_cache(crawler: Any) -> DnsCache:
    """The process's DnsCache: the installed PinnedResolver's, installing one if needed.

    ``scrapy crawl`` installs the resolver from ``TWISTED_DNS_RESOLVER``; a script that runs
    crawls with ``CrawlerRunner`` does not, so the first component that asks installs it.
    """
    reactor = installed_reactor()
    resolver = getattr(reactor, "resolver", None)
    if not isinstance(resolver, PinnedResolver):
        logger.info("Installing larbinscrapy's PinnedResolver on the reactor")
        resolver = PinnedResolver.from_crawler(crawler, reactor)
        resolver.install_on_reactor()
    return resolver.cache
