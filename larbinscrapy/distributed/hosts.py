"""DNS of the hosts the shared frontier hands a worker (a part of ``RedisScheduler``).

New hosts come back from a pop as "unresolved": the worker resolves them through its host gate
(``politeness.ipsites``: its own ``DnsCache`` and SSRF guard) and stores the answer in the
host's shard (the first answer wins), or the failure (its sites are dropped and counted). A
record leased for a host another worker resolved is resolved here too before it is handed out,
so this worker's cache (which the connection uses) and SSRF guard have seen the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from larbinscrapy import meta as M
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.parse.urls import host_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector
    from twisted.python.failure import Failure

    from larbinscrapy.distributed.admits import Admits
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.distributed.readiness import ShardClock
    from larbinscrapy.politeness import HostRegistry


class HostResolution:
    """Resolves hosts for ``RedisScheduler`` and stores the answers (module docstring)."""

    def __init__(
        self,
        link: FrontierLink,
        *,
        politeness: HostRegistry,
        admits: Admits,
        clock: ShardClock,
        stats: StatsCollector,
        wake: Callable[[], None],
    ) -> None:
        self.link = link
        self.politeness = politeness
        self.admits = admits
        self.clock = clock
        self.stats = stats
        self.wake = wake
        self.resolving: set[str] = set()  # hosts being resolved, until Redis has the answer

    def resolve_leased(self, host: str, request: Request, then: Callable[[Request], None]) -> None:
        """``request`` was leased for ``host``, resolved by another worker: resolve it here,
        then hand it on (``then``), or drop it and acknowledge its record."""
        d = self.politeness.resolve(host)
        d.addCallbacks(
            self.resolved_here,
            self.unresolved_here,
            callbackArgs=(request, then),
            errbackArgs=(request,),
        )

    def resolved_here(self, ip: str, request: Request, then: Callable[[Request], None]) -> None:
        if ip != request.meta[M.IP]:
            self.stats.inc_value("larbin/distributed/dns_mismatch")
        then(request)

    def unresolved_here(self, failure: Failure, request: Request) -> None:
        failure.trap(DroppedRequest)
        self.politeness.count_drop(cast("DroppedRequest", failure.value).reason)
        self.politeness.lease_returned(request.meta.pop(M.LEASE), host_of(request.url))
        self.admits.ack(request.meta[M.RID])

    def resolve(self, host: str) -> None:
        if host in self.resolving:
            return
        self.resolving.add(host)
        d = self.politeness.resolve(host)
        d.addCallbacks(
            self.host_resolved, self.host_failed, callbackArgs=(host,), errbackArgs=(host,)
        )

    def host_resolved(self, ip: str, host: str) -> None:
        # ``host`` stays in ``resolving`` until Redis has the answer (no second lookup).
        shard, frontier = self.link.frontier_of(host)
        self.link.jobs.submit(
            "resolved",
            frontier.resolved_call(host, ip),
            then=lambda _: self.host_stored(shard),
            always=lambda: self.resolving.discard(host),
        )

    def host_stored(self, shard: int) -> None:
        self.clock.now(shard)
        self.wake()

    def host_failed(self, failure: Failure, host: str) -> None:
        failure.trap(DroppedRequest)
        reason = self.politeness.host_dropped(host, failure)

        def count(result: tuple[str, int]) -> None:
            self.politeness.count_drop(reason, result[1])

        _, frontier = self.link.frontier_of(host)
        self.link.jobs.submit(
            "resolved",
            frontier.resolved_call(host, None, reason),
            then=count,
            always=lambda: self.resolving.discard(host),
        )
