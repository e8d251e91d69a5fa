"""``Pops``: the requests a worker leases from the shared frontier, until the engine takes them.

``next_request`` hands out ``ready`` (popped, resolved requests); when it is empty, ``pop``
starts pops on up to ``POP_SHARDS`` shards whose IPs may be ready (``ShardClock``), round
robin, ``POP_BATCH`` leases each. A pop's answer leases records (in a cluster after the IP's own
lease, ``iplease.py``, or the record goes back to its shard), counts the records it dropped, and
names the new hosts to resolve (``HostResolution``); a leased request whose host this worker
never resolved is resolved before it is handed out. A pop that leased nothing says how long the
shard waits (a shard with nothing queued: a back-off, ``ShardClock.nothing``); a failed one is
retried ``POLL`` later.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import TYPE_CHECKING

from larbinscrapy.distributed.link import POLL
from larbinscrapy.parse.urls import host_of
from larbinscrapy.politeness.hosts import THROTTLED
from larbinscrapy.politeness.ipsites import NOCONNECTION

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from larbinscrapy.distributed.frontier import Popped
    from larbinscrapy.distributed.held import HeldLeases
    from larbinscrapy.distributed.hosts import HostResolution
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.distributed.readiness import ShardClock
    from larbinscrapy.distributed.view import SharedView
    from larbinscrapy.politeness import HostRegistry

POP_BATCH = 8  # leased requests fetched from Redis per pop
POP_SHARDS = 4  # shards one pop asks at once (a cluster)


class Pops:
    """Pops, leases and the ready requests (module docstring)."""

    def __init__(
        self,
        link: FrontierLink,
        *,
        view: SharedView,
        clock: ShardClock,
        held: HeldLeases,
        hosts: HostResolution,
        politeness: HostRegistry,
        stats: StatsCollector,
        hand_out: Callable[[bytes, str, str], Request],
        wake: Callable[[], None],
        wake_in: Callable[[float], None],
    ) -> None:
        self.link = link
        self.view = view
        self.clock = clock
        self.held = held
        self.hosts = hosts
        self.politeness = politeness
        self.stats = stats
        self.hand_out = hand_out  # the request of a leased record
        self.wake = wake
        self.wake_in = wake_in
        self.ready: deque[Request] = deque()  # leased, resolved, not yet handed to the engine
        self.lease_seq = [0] * link.shards.count  # leases each shard gave us so far
        self.next_shard = 0
        self.popping = 0  # pops in flight
        self.popping_shards: set[int] = set()
        self.closing = False

    def pop(self) -> None:
        """Start pops on up to ``POP_SHARDS`` shards whose IPs may be ready, round robin."""
        now = self.politeness.table.clock()
        count = self.link.shards.count
        jobs = self.link.jobs
        for i in range(count):
            if self.popping >= POP_SHARDS:
                break
            k = (self.next_shard + i) % count
            if k in self.popping_shards or not self.clock.due(k, now):
                continue
            self.popping += 1
            self.popping_shards.add(k)
            call = self.link.frontier(k).pop_call(self.link.worker, POP_BATCH, self.lease_seq[k])
            seq = jobs.seq + 1
            jobs.submit(
                "pop",
                call,
                then=partial(self._popped, k, seq=seq),
                always=partial(self._ended, k),
                failed=partial(self._failed, k),
            )
        self.next_shard = (self.next_shard + 1) % count

    def _ended(self, shard: int) -> None:
        self.popping -= 1
        self.popping_shards.discard(shard)

    def _failed(self, shard: int) -> None:
        self.clock.wait(shard, self.politeness.table.clock() + POLL)
        self.wake_in(POLL)

    def _popped(self, shard: int, popped: Popped, *, seq: int) -> None:
        if self.closing:  # the retirement (queued after this pop) hands these back
            return
        self.lease_seq[shard] += len(popped.leases)
        self.view.popped(shard, popped.queued)
        self.politeness.count_drop(NOCONNECTION, popped.dropped)
        self.politeness.count_drop(THROTTLED, popped.aside)
        if popped.to_wait:
            self.stats.inc_value("larbin/frontier/to_wait", popped.to_wait)
        for host in popped.unresolved:
            self.hosts.resolve(host)
        for lease, ip, record in popped.leases:
            self._lease(shard, lease, ip, record)
        if popped.leases:
            self.view.changed(seq)
            self.clock.leased(shard)
        elif popped.wait is None and not popped.queued:  # an empty shard: back off
            self.wake_in(self.clock.nothing(shard, self.politeness.table.clock(), POLL))
        else:
            wait = POLL if popped.wait is None else min(POLL, popped.wait)
            self.clock.wait(shard, self.politeness.table.clock() + wait)
            self.wake_in(wait)
        self.wake()  # to hand the requests out, or to let it see it is idle

    def _lease(self, shard: int, lease: str, ip: str, record: bytes) -> None:
        link = self.link
        rid = link.fs.rid(shard, lease)
        if link.ips is None:
            self._leased(shard, rid, ip, record)
            return
        # a cluster: the IP's own lease first
        giveback = link.frontier(shard).giveback_call(link.worker, lease, POLL)
        link.jobs.submit(
            "iplease",
            link.ips.acquire_call(ip, link.token(rid)),
            then=partial(self._ip_answer, shard=shard, rid=rid, lease=lease, ip=ip, record=record),
            failed=partial(link.send, "giveback", giveback),
        )

    def _ip_answer(
        self, wait: float, *, shard: int, rid: str, lease: str, ip: str, record: bytes
    ) -> None:
        """Cluster: the IP's own lease is ours (0), or give the record back to its shard."""
        if not wait:
            self._leased(shard, rid, ip, record)
            return
        self.stats.inc_value("larbin/distributed/ip_busy_elsewhere")
        self.link.send(
            "giveback", self.link.frontier(shard).giveback_call(self.link.worker, lease, wait)
        )

    def _leased(self, shard: int, rid: str, ip: str, record: bytes) -> None:
        request = self.hand_out(record, rid, ip)
        self.held.hold(ip, shard, rid)
        table = self.politeness.table
        table.acquire(table.get(ip))
        host = host_of(request.url)
        if self.politeness.cached_ip(host) is not None:
            self.ready.append(request)
            return
        # Resolved by another worker: resolve here too, so this worker's DnsCache (which the
        # connection uses) and SSRF guard have seen the host before anything is sent.
        self.hosts.resolve_leased(host, request, self.hand)

    def hand(self, request: Request) -> None:
        """``request`` is ready: the engine may take it."""
        self.ready.append(request)
        self.wake()

    def close(self) -> None:
        """The scheduler closes: pops still in flight are handed back by the retirement."""
        self.closing = True
