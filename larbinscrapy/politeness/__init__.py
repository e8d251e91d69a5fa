"""Politeness: per-IP and per-host pacing, DNS pinned once, throttling pauses, robots.txt rules.

Owns the pure politeness state the frontier and the politeness middleware share. Two interfaces
are declared here: ``HostRegistry``, the host gate and its per-IP/per-host table as the schedulers
and the middlewares ask them (``Politeness``, found with ``ipsites.politeness_of``), and
``RobotsCache``, the robots.txt rules cached beyond this process (the Redis frontier's
``robots``: one fetch a site for every worker) as the robots middleware asks them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from larbinscrapy.politeness.dns import DnsCache
    from larbinscrapy.politeness.ipsites import IpTable
    from larbinscrapy.politeness.robotsrules import SiteRules

__all__ = ["HostRegistry", "RobotsCache"]


class HostRegistry(Protocol):
    """The crawl's hosts and IPs: who may be fetched, when, and what became of each fetch."""

    table: IpTable  # per-IP connections and delays, with ``hosts`` and ``bandwidth``
    dns: DnsCache | None  # None: the local form, a host is its own IP
    hosts_scheduled: bool  # the scheduler picks requests by host readiness too
    proxied: bool  # every request goes through a proxy: a host's "IP" is its name

    def resolve(self, host: str) -> Deferred[str]:
        """The IP to crawl ``host`` at; fails with ``DroppedRequest`` if it must not be."""

    def cached_ip(self, host: str) -> str | None:
        """The IP of ``host`` if this process already resolved it."""

    def prefetch(self, host: str) -> None:
        """Start resolving ``host`` ahead of its turn (its first URL entered the frontier)."""

    def check_ip(self, ip: str) -> str:
        """``ip`` if a request may go there; ``DroppedRequest`` if not."""

    def count_drop(self, reason: str, count: int = 1) -> None:
        """Count ``count`` requests dropped under ``larbin/dropped/<reason>``."""

    def host_dropped(self, host: str, failure: Failure) -> str:
        """A host's URLs are being dropped: log the first host per reason; the reason."""

    def fetch_ended(
        self,
        ip: str,
        *,
        release: bool,
        failed: bool | str | None,
        retry: bool = False,
        written: float | None = None,
    ) -> None:
        """A request sent to ``ip`` (written to its connection at ``written``) ended: set the
        IP's next start, count its failures."""

    def throttled(self, ip: str, host: str, status: int, retry_after: float | None) -> float | None:
        """A throttling answer: pause ``host`` and its IP; the pause, or None if set aside."""

    def lease_returned(self, ip: str, host: str = "", outcome: str = "") -> None:
        """Give back the connection the scheduler leased on ``ip``."""


class RobotsCache(Protocol):
    """robots.txt rules cached for every worker: one fetch a site for the whole crawl.

    The robots middleware keeps each site's parser itself and asks this cache before a fetch
    (``claim``) and tells it after (``store``); the sitemap reader hears of each parsed
    robots.txt through Scrapy's ``robots_parsed`` signal.
    """

    async def claim(
        self, site: str, now: Callable[[], float], wall: Callable[[], float]
    ) -> tuple[SiteRules, bytes] | None:
        """The shared rules and body of ``site``; None when this worker is to fetch them."""

    def store(
        self, site: str, rules: SiteRules, body: bytes | None, now: float, wall: float
    ) -> None:
        """Share ``rules`` (and ``body``) until they expire; ``body`` None only gives up."""
