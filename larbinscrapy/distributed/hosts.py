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
    from scrapy import Request
    from twisted.python.failure import Failure

    from larbinscrapy.distributed.scheduler import RedisScheduler


class HostResolution:
    """Resolves hosts for ``RedisScheduler`` and stores the answers (module docstring)."""

    def __init__(self, scheduler: RedisScheduler) -> None:
        self.s = scheduler
        self.resolving: set[str] = set()  # hosts being resolved, until Redis has the answer

    def resolve_leased(self, host: str, request: Request) -> None:
        """``request`` was leased for ``host``, resolved by another worker: resolve it here."""
        d = self.s.politeness.resolve(host)
        d.addCallbacks(self.resolved_here, self.unresolved_here,
                       callbackArgs=(request,), errbackArgs=(request,))

    def resolved_here(self, ip: str, request: Request) -> None:
        s = self.s
        if ip != request.meta[M.IP]:
            s.stats.inc_value("larbin/distributed/dns_mismatch")
        s.ready.append(request)
        s._wake_engine()

    def unresolved_here(self, failure: Failure, request: Request) -> None:
        s = self.s
        failure.trap(DroppedRequest)
        s.politeness.count_drop(cast("DroppedRequest", failure.value).reason)
        s.politeness.lease_returned(request.meta.pop(M.LEASE), host_of(request.url))
        s.acks.append(request.meta[M.RID])
        s.flush()

    def resolve(self, host: str) -> None:
        s = self.s
        if host in self.resolving:
            return
        self.resolving.add(host)
        d = s.politeness.resolve(host)
        d.addCallbacks(self.host_resolved, self.host_failed,
                       callbackArgs=(host,), errbackArgs=(host,))

    def host_resolved(self, ip: str, host: str) -> None:
        s = self.s
        # ``host`` stays in ``resolving`` until Redis has the answer (no second lookup).
        shard = s.shards.of(host)
        s.jobs.submit("resolved", s.fs.frontiers[shard].resolved_call(host, ip),
                     then=lambda _: self.host_stored(shard),
                         always=lambda: self.resolving.discard(host))

    def host_stored(self, shard: int) -> None:
        s = self.s
        s._shard_next[shard] = 0.0
        s._wake_engine()

    def host_failed(self, failure: Failure, host: str) -> None:
        s = self.s
        failure.trap(DroppedRequest)
        reason = s.politeness.host_dropped(host, failure)

        def count(result: tuple[str, int]) -> None:
            s.politeness.count_drop(reason, result[1])

        s.jobs.submit("resolved",
                         s.fs.frontiers[s.shards.of(host)].resolved_call(host, None, reason),
                     then=count, always=lambda: self.resolving.discard(host))
