"""larbin's ``fetchDns``: each hostname resolved once, asynchronously, and pinned."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from twisted.internet.threads import deferToThreadPool
from zope.interface import implementer

from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.settings import BaseSettings
    from twisted.internet.defer import Deferred

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


def _getaddrinfo_ipv4(host: str) -> str:
    infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    if not infos:
        raise DNSLookupError(host)
    return str(infos[0][4][0])


class DnsCache:
    """``host -> IP`` with TTL, negative entries and shared in-flight lookups."""

    def __init__(
        self,
        reactor: Any,
        *,
        ttl: float = 3600,
        timeout: float = 10,
        overrides: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        lookup: Callable[[str], Deferred[str]] | None = None,
    ) -> None:
        self._reactor = reactor
        # how a name is asked for: getaddrinfo in the reactor's thread pool unless given
        self._lookup = lookup or self._getaddrinfo
        self._ttl = ttl
        self._timeout = timeout
        self._overrides = dict(overrides or {})
        self._clock = clock
        self._entries: dict[str, tuple[float, str | None]] = {}  # host -> (expiry, ip or None)
        self._purge_at = _PURGE_MIN
        self._inflight: dict[str, list[Deferred[str]]] = {}
        self.lookups = 0  # queries actually made (overrides included), for stats and tests
        self.failures = 0

    @classmethod
    def from_settings(cls, settings: BaseSettings, reactor: Any) -> DnsCache:
        return cls(
            reactor,
            ttl=settings.getfloat("LARBIN_DNS_TTL"),
            timeout=settings.getfloat("DNS_TIMEOUT"),
            overrides=parse_resolve(settings.get("LARBIN_RESOLVE")),
        )

    def cached(self, host: str) -> str | bool | None:
        """The cached answer without waiting: an IP, None (known failure), False (unknown)."""
        if is_ip(host):
            return host.strip("[]")
        entry = self._entries.get(host.lower())
        if entry is None or entry[0] < self._clock():
            return False
        return entry[1]

    def resolve(self, host: str) -> Deferred[str]:
        """The IP of ``host``; fails with ``DNSLookupError`` (also when a failure is cached)."""
        host = host.lower()
        answer = self.cached(host)
        if isinstance(answer, str):
            return defer.succeed(answer)
        if answer is None:
            return defer.fail(DNSLookupError(f"{host}: lookup failed (cached)"))
        d: Deferred[str] = defer.Deferred()
        waiters = self._inflight.get(host)
        if waiters is not None:
            waiters.append(d)
            return d
        self._inflight[host] = [d]
        self.lookups += 1
        if host in self._overrides:
            self._reactor.callLater(0, self._done, host, self._overrides[host])
            return d
        query = self._lookup(host)
        query.addTimeout(self._timeout, self._reactor)
        query.addCallbacks(lambda ip: self._done(host, ip), lambda f: self._done(host, None, f))
        return d

    def _getaddrinfo(self, host: str) -> Deferred[str]:
        return deferToThreadPool(
            self._reactor, self._reactor.getThreadPool(), _getaddrinfo_ipv4, host
        )

    def _done(self, host: str, ip: str | None, failure: Any = None) -> None:
        now = self._clock()
        self._entries[host] = (now + self._ttl, ip)
        if len(self._entries) >= self._purge_at:
            self._purge(now)
        if ip is None:
            self.failures += 1
            logger.debug(
                "DNS lookup of %s failed: %s",
                host,
                failure.getErrorMessage() if failure else "no address",
            )
        for waiter in self._inflight.pop(host, ()):
            if ip is None:
                waiter.errback(DNSLookupError(f"{host}: lookup failed"))
            else:
                waiter.callback(ip)


    def _purge(self, now: float) -> None:
        """Forget expired answers: a broad crawl meets millions of hosts, most of them once.

        Runs when the table doubled since the last purge, so its cost is amortised O(1) per
        lookup and memory is bounded by the hosts seen within one TTL.
        """
        self._entries = {h: e for h, e in self._entries.items() if e[0] >= now}
        self._purge_at = max(_PURGE_MIN, 2 * len(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


_PURGE_MIN = 10_000  # entries before the first purge of expired answers


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
