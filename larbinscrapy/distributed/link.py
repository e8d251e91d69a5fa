"""``FrontierLink``: one worker's way to the shared frontier, handed to each part of
``RedisScheduler``.

It owns what every part needs to reach Redis: the ordered Redis thread (``jobs.py``), the shard
map, this worker's id, the shards' frontiers (``ShardedFrontier``, built in the Redis thread once
it connected, ``build``) and, in a cluster, the IPs' own leases (``iplease.py``). ``send`` is
the fire-and-forget submit whose loss would keep an IP busy for every worker: while Redis is
away it is sent again every ``POLL`` s, until ``stop``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larbinscrapy.distributed.frontier import Throttle
from larbinscrapy.distributed.iplease import IpLeases
from larbinscrapy.distributed.sharded import ShardedFrontier
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.distributed.frontier import RedisFrontier
    from larbinscrapy.distributed.jobs import Call, RedisJobs
    from larbinscrapy.distributed.shards import Shards
    from larbinscrapy.politeness.ipsites import IpTable

POLL = 0.25  # seconds: the longest a worker waits before asking Redis again when idle


class FrontierLink:
    """The Redis thread, shards, worker id, frontiers and IP leases (module docstring)."""

    def __init__(self, jobs: RedisJobs, shards: Shards, worker: str) -> None:
        self.jobs = jobs
        self.shards = shards
        self.worker = worker
        self.fs: ShardedFrontier  # ``build``
        self.ips: IpLeases | None = None  # a cluster: the IPs' own leases
        self.stopped = False  # closing, or Redis is gone: ``send`` tries no more

    def build(
        self,
        server: Any,
        table: IpTable,
        *,
        seeds_key: str,
        max_per_site: int,
        loaded_sites: int,
        lease_timeout: float,
    ) -> None:
        """The shards' frontiers over ``server`` (no I/O; the Redis thread, where a cluster
        client connects)."""
        delay = table.default_delay
        connections = 1 if delay > 0 else table.max_connections
        hosts = table.hosts
        throttle = Throttle(hosts.throttle_backoff, hosts.max_backoff, hosts.max_in_a_row)
        hold = lease_timeout if connections > 1 and hosts.default_delay > 0 else 0.0
        self.fs = ShardedFrontier(
            server,
            self.shards,
            seeds_key=seeds_key,
            max_per_site=max_per_site,
            loaded_sites=loaded_sites,
            connections=connections,
            throttle=throttle,
            hold=hold,
        )
        if self.fs.cluster:
            self.ips = IpLeases(
                self.shards.ip_key, connections=connections, lease_timeout=lease_timeout, poll=POLL
            )

    def frontier(self, shard: int) -> RedisFrontier:
        return self.fs.frontiers[shard]

    def frontier_of(self, host: str) -> tuple[int, RedisFrontier]:
        """``host``'s shard and that shard's frontier."""
        shard = self.shards.of(host)
        return shard, self.fs.frontiers[shard]

    def token(self, rid: str) -> str:
        """The owner of an IP's own lease (a cluster): this worker's record ``rid``."""
        return f"{self.worker}/{rid}"

    def send(self, what: str, call: Call, then: Callable[[Any], Any] | None = None) -> None:
        """Submit ``call``; while Redis is away, again every ``POLL`` s (a lost release would
        keep its IP busy for every worker)."""

        def again() -> None:
            if not self.stopped:
                installed_reactor().callLater(POLL, self.send, what, call, then)

        self.jobs.submit(what, call, then=then, failed=again)

    def stop(self) -> None:
        self.stopped = True
