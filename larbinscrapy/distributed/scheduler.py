"""``RedisScheduler``: the local scheduler's frontier shared by many workers through Redis.

    SCRAPY_SETTINGS_MODULE=settings.distributed scrapy crawl larbin -s REDIS_URL=redis://...

The frontier (tiers, wait lists, per-site caps, per-IP readiness, leases) is ``RedisFrontier``,
one per shard (``sharded.py``); this class is its Scrapy side:

* ``enqueue_request`` encodes the request (``frontier.codec``), computes its shard, site, host
  and bit positions, and buffers it; the buffer goes to Redis as one ``admit`` per shard
  (test-and-set of the bits, queueing of the new ones, then the acknowledgement of the page
  that produced them) when the page is done (``PendingPages``), on a redirect/retry, or at the
  next ``next_request``;
* ``next_request`` hands out ``ready`` (popped, resolved requests); when it is empty it starts
  pops on a few shards whose IPs may be ready (one with a single Redis). An IP is handed to one
  worker at a time (``CONCURRENT_REQUESTS_PER_DOMAIN`` at a time without a delay) and is ready
  again its delay after that worker reports the end of the fetch, each host its own, and the
  host's throttling run is counted for all (``release``, ``releases.py``); robots.txt
  borrows the page's lease (``RobotsMiddleware``). In a cluster every lease also takes the IP's
  own lease key (``iplease.py``), so an IP shared by hosts of several shards keeps its delay;
* DNS: new hosts come back from ``pop`` as "unresolved"; the worker resolves them through its
  host gate (its own ``DnsCache`` and SSRF guard) and stores the answer (``resolved``); a worker
  handed a host it never resolved resolves it before sending;
* heartbeat, reaping of silent workers (``kill -9``: nothing is lost), seeds from
  ``REDIS_START_URLS_KEY`` and the ending rule: ``membership.py``. A graceful stop (SIGINT)
  hands unacknowledged records back.

Redis is never called in the reactor thread: every round trip is a job of the worker's ordered
Redis thread (``jobs.py``, which batches them; a cluster client even connects there). ``flush``,
``release`` and ``resolved`` are fire-and-forget, their results applied when they arrive; a
failed job never wedges the worker (a failed pop is retried ``POLL`` later). ``open`` and
``close`` return Deferreds: ``close`` queues the last admit and then the retirement behind
whatever is in flight.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import defer, task

from larbinscrapy import fatal
from larbinscrapy.distributed.connection import UNREACHABLE, connector
from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.distributed.frontier import NORMAL, PRIORITY, Popped, RedisFrontier, Throttle
from larbinscrapy.distributed.hosts import HostResolution
from larbinscrapy.distributed.iplease import IpLeases
from larbinscrapy.distributed.jobs import Call, RedisJobs
from larbinscrapy.distributed.membership import POLL, Membership
from larbinscrapy.distributed.releases import Releases
from larbinscrapy.distributed.robots import SharedRobots
from larbinscrapy.distributed.seeds import IdleRule, RedisSeeds
from larbinscrapy.distributed.sharded import Entry, ShardedFrontier
from larbinscrapy.distributed.shards import Shards
from larbinscrapy.distributed.sitemaps import SharedSitemaps
from larbinscrapy.frontier.base import FrontierScheduler
from larbinscrapy.parse.urls import host_of, site_of
from larbinscrapy.politeness.hosts import THROTTLED
from larbinscrapy.politeness.ipsites import NOCONNECTION
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from larbinscrapy.politeness.ipsites import IpTable

logger = logging.getLogger(__name__)

POP_BATCH = 8  # leased requests fetched from Redis per pop
POP_SHARDS = 4  # shards one pop asks at once (a cluster)
FLUSH_RECORDS = 500  # buffered requests that force an admit before the page is done


class RedisScheduler(FrontierScheduler):
    """Scrapy scheduler over the shared frontier (see the module docstring)."""

    PRIORITY_TIER = PRIORITY
    NORMAL_TIER = NORMAL
    REQUIRES_GATE = True  # each worker resolves and checks the hosts it is handed

    def __init__(
        self,
        crawler: Crawler,
        dupefilter: RedisBitmapDupeFilter,
        server: Any,
        *,
        frontier_key: str,
        seeds: RedisSeeds,
        lease_timeout: float,
        idle_before_close: float,
        keep_alive: bool,
        persist: bool,
        outage_timeout: float,
        max_per_site: int,
        loaded_sites: int,
        priority_extensions: frozenset[str],
        local_table: IpTable,
        redis_where: str = "",
        connect: Callable[[], Any] | None = None,
        shards: int = 1,
    ) -> None:
        super().__init__(crawler, dupefilter, max_per_site=max_per_site,
                         loaded_sites=loaded_sites, priority_extensions=priority_extensions,
                         local_table=local_table)
        self.server = server  # None until the Redis thread connected (a cluster)
        self.redis_where = redis_where or fatal.redis_location(server)  # for messages
        self._unreachable = False
        self.frontier_key = frontier_key
        self.shards = Shards(shards, frontier_key, dupefilter.key, dupefilter.m)
        self.seeds = seeds
        self.lease_timeout = lease_timeout
        self.idle = IdleRule(idle_before_close)
        self.keep_alive = keep_alive
        self.persist = persist
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.fs: ShardedFrontier
        self.ips: IpLeases | None = None  # a cluster: the IPs' own leases
        self.buffers: list[list[Entry]] = [[] for _ in range(shards)]
        self._buffered = 0
        self.acks: list[str] = []
        self.seeds_pending = False
        self.ready: deque[Request] = deque()  # leased, resolved, not yet handed to the engine
        self.hosts = HostResolution(self)  # DNS of the hosts the frontier hands us
        self.releases = Releases(self)  # the end of each leased fetch, for everyone
        self.shared_queued = 0
        self._lease_seq = [0] * shards
        self._queued = [0] * shards  # each shard's queued records, as its last pop said
        self._shard_next = [0.0] * shards  # when each shard may have a ready IP again
        self._next_shard = 0
        self._ip_shards: dict[str, list[tuple[int, str]]] = {}  # ip -> (shard, token) held
        self._loop: task.LoopingCall | None = None
        self._ticks = 0
        self._tick_seq = 0
        self.jobs = RedisJobs(server=server, connect=connect, outage_timeout=outage_timeout,
                              on_outage=self._outage, stats=crawler.stats)
        self.robots = SharedRobots(self.jobs, self.shards, self.worker,  # one fetch a site
                                   int(crawler.settings.getfloat("DOWNLOAD_TIMEOUT") * 1000))
        self.sitemaps = SharedSitemaps(self)  # one reader a site, each fetch under the IP lease
        self._popping = 0  # pops in flight
        self._popping_shards: set[int] = set()
        self._admitting = 0
        self._ticking = False
        self._closing = False
        self._status: dict[str, int] | None = None  # the last status read by a tick
        self._want_status = False  # spider_idle asked the next tick for one
        self._status_seq = 0  # the job that read it
        self._changed_seq = 0  # the last job that may have queued or leased records
        self.member = Membership(self)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisScheduler:
        s = crawler.settings
        common = cls.frontier_settings(crawler)
        if not isinstance(common["dupefilter"], RedisBitmapDupeFilter):
            raise NotConfigured("RedisScheduler needs DUPEFILTER_CLASS = RedisBitmapDupeFilter")
        name = crawler.spidercls.name
        names = {"spider": name, "name": name}
        seeds = RedisSeeds(s["REDIS_START_URLS_KEY"] % names,
                           s.getint("REDIS_START_URLS_BATCH_SIZE"), crawler.stats)
        server, connect, shards = connector(s)
        return cls(
            crawler,
            server=server,
            connect=connect,
            shards=shards,
            redis_where=fatal.redacted(s.get("REDIS_URL") or ""),
            frontier_key=s["LARBIN_REDIS_FRONTIER_KEY"] % names,
            seeds=seeds,
            lease_timeout=s.getfloat("LARBIN_REDIS_LEASE_TIMEOUT"),
            idle_before_close=s.getfloat("LARBIN_REDIS_IDLE_BEFORE_CLOSE"),
            keep_alive=s.getbool("LARBIN_REDIS_KEEP_ALIVE"),
            persist=s.getbool("SCHEDULER_PERSIST"),
            outage_timeout=s.getfloat("LARBIN_REDIS_OUTAGE_TIMEOUT"),
            **common,
        )

    # -- Scrapy's scheduler contract ------------------------------------------------------
    def open(self, spider: Spider) -> defer.Deferred[None]:
        self.spider = spider
        self._connect()
        # the shared frontier waits for each host: a leased request whose host must still wait
        # (after its robots.txt) goes back to it, the IP serves other hosts meanwhile
        self.politeness.hosts_scheduled = True
        self.jobs.start()
        # the send-time gate gives a lease back exactly when a request we leased ends
        self.table.add_release_listener(self.releases.released)
        self.crawler.signals.connect(self.member.spider_idle, signal=signals.spider_idle)

        def join() -> tuple[tuple[int, int], dict[str, int]]:
            self._build(self.jobs.server)  # connected in this thread (a cluster client)
            return self.member.heartbeat_job(), self.fs.status()

        # Not submit: a failure here must fail the start (Scrapy awaits this Deferred).
        d = self.jobs.run(join)
        d.addCallbacks(self._joined, self._join_failed)
        return d

    @property
    def frontier(self) -> RedisFrontier:
        """The first shard's frontier: the whole frontier with one Redis."""
        return self.fs.frontiers[0]

    def _build(self, server: Any) -> None:
        """The shards' frontiers over ``server`` (no I/O)."""
        self.server = server
        delay = self.table.default_delay
        connections = 1 if delay > 0 else self.table.max_connections
        hosts = self.table.hosts
        throttle = Throttle(hosts.throttle_backoff, hosts.max_backoff, hosts.max_in_a_row)
        hold = self.lease_timeout if connections > 1 and hosts.default_delay > 0 else 0.0
        self.fs = ShardedFrontier(server, self.shards, seeds_key=self.seeds.key,
                                  max_per_site=self.max_per_site,
                                  loaded_sites=self.loaded_sites, connections=connections,
                                  throttle=throttle, hold=hold)
        if self.fs.cluster:
            self.ips = IpLeases(self.shards.ip_key, connections=connections,
                                lease_timeout=self.lease_timeout, poll=POLL)

    def _join_failed(self, failure: Failure) -> None:
        """Redis is not there: one line naming it, and the crawl ends (``fatal``), exit 1."""
        failure.trap(*UNREACHABLE)
        self._unreachable = True
        fatal.stop(self.crawler, fatal.REDIS_UNREACHABLE,
                   f"cannot reach Redis at {self.redis_where}: {failure.getErrorMessage()}")

    def _outage(self, detail: str) -> None:
        """Redis stayed away (``RedisJobs``): stop, one line; its state waits in Redis."""
        self._unreachable = True
        fatal.stop(self.crawler, fatal.REDIS_UNREACHABLE,
                   f"Redis at {self.redis_where} {detail}: stopping this worker; what it had "
                   f"leased goes back to the queue in Redis (LARBIN_REDIS_LEASE_TIMEOUT)")

    def _joined(self, result: tuple[tuple[int, int], dict[str, int]]) -> None:
        reaped, status = result
        self.member.heartbeat_done(reaped)
        self.shared_queued = status["queued"]
        logger.info("Worker %s joined frontier %s (%d shard%s): %d queued, %d leased, %d seeds "
                    "waiting", self.worker, self.frontier_key, self.shards.count,
                    "s" * (self.shards.count > 1), status["queued"], status["leased"],
                    status["seeds"])
        self._loop = task.LoopingCall(self.member.tick)
        self._loop.start(min(POLL, self.lease_timeout / 4), now=False)

    def close(self, reason: str) -> defer.Deferred[None]:
        """Queue the last admit and the retirement behind the jobs in flight; Scrapy awaits."""
        self._closing = True
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._cancel_wakeup()
        if self._unreachable:  # never joined, or Redis went away: no Redis to tell
            self.jobs.stop()
            return defer.succeed(None)
        self._settle_items()  # pages whose items are stored: acknowledged, not handed back
        self.flush(now=True)  # behind the admit in flight, before the retirement

        def retire() -> tuple[int, dict[str, int], int | None]:
            requeued = self.fs.retire(self.worker)
            status = self.fs.status()
            bits = self.fs.bits_set(self.df.m) if self.df.stats is not None else None
            if reason == "finished" and not self.persist and not status["workers"]:
                self.fs.delete()
            return requeued, status, bits

        d = self.jobs.submit("close", retire, then=self._retired)
        d.addBoth(lambda _: self.jobs.stop())
        return d

    def _retired(self, result: tuple[int, dict[str, int], int | None]) -> None:
        requeued, status, bits = result
        if requeued:
            logger.info("Handed %d unacknowledged requests back to the frontier", requeued)
        self.stats.set_value("larbin/frontier/left_queued", status["queued"])
        if bits is not None:
            self.df.report_bits(bits)

    def has_pending_requests(self) -> bool:
        return bool(self.ready or self.memory_only or self._buffered or self.shared_queued > 0
                    or self._popping or self._admitting)

    def __len__(self) -> int:
        return len(self.ready) + len(self.memory_only) + self._buffered + self.shared_queued

    def _enqueue(self, request: Request, previous: Any, *, seen_test: bool) -> bool:
        record = self._encode(request)
        if record is not None:
            url = request.url
            host = host_of(url)
            shard = self.shards.of(host)
            positions = (self.shards.positions(self.df.request_positions(request))
                         if seen_test else [])
            entry = self.fs.frontiers[shard].entry(site_of(url), host, record)
            self.buffers[shard].append((self._tier(request), positions, entry))
            self._buffered += 1
        if previous is not None:
            self.acks.append(previous)
            self.flush()
        elif self._buffered >= FLUSH_RECORDS:
            self.flush()
        return True

    def next_request(self) -> Request | None:
        if self.memory_only:
            return self.memory_only.popleft()
        if not self.ready:
            self.flush()
            self._pop()
        if self.ready:
            self.stats.inc_value("larbin/frontier/dequeued")
            return self.ready.popleft()
        return None

    def _quiet_until(self) -> float:
        """When the first shard may have a ready IP (the engine need not ask before)."""
        return min(self._shard_next)

    # -- to and from Redis -----------------------------------------------------------------
    def flush(self, now: bool = False) -> None:
        """Admit the buffered requests and send the pending acknowledgements: one script per
        shard (``ShardedFrontier.admit``). One admit in flight at a time: what is buffered
        meanwhile goes with the next one (sent when it ends), so a busy worker admits many
        pages' links per script, not one page's links per shard."""
        if not (self._buffered or self.acks or self.seeds_pending):
            return
        if self._admitting and not now and self._buffered < FLUSH_RECORDS:
            return
        buffers, acks, seeds = self.buffers, self.acks, self.seeds_pending
        self.buffers = [[] for _ in buffers]
        self.acks, self.seeds_pending, self._buffered = [], False, 0
        self._admitting += 1
        if self.fs.cluster:
            job: Any = (self.fs.admit, self.worker, buffers, acks, seeds)
        else:  # one call: batched with the other calls of this round trip
            job = (self.fs.admit_calls(self.worker, buffers, acks, seeds)[0][0],)
        self.jobs.submit("admit", *job, then=self._admitted, always=self._admit_ended,
                         failed=partial(self._admit_failed, buffers, acks, seeds))
        self._changed_seq = self.jobs.seq

    def _admit_failed(self, buffers: list[list[Entry]], acks: list[str], seeds: bool) -> None:
        """Redis away: admit them again with the next flush (an admit is idempotent: what it
        queued before its answer was lost is filtered by its own bits, acks are deleted once)."""
        for mine, failed in zip(self.buffers, buffers, strict=True):
            mine[:0] = failed
        self._buffered += sum(len(b) for b in buffers)
        self.acks[:0] = acks
        self.seeds_pending = self.seeds_pending or seeds

    def _send(self, what: str, call: Call, then: Callable[[Any], Any] | None = None) -> None:
        """Submit ``call``; while Redis is away, again every ``POLL`` s (a lost release would
        keep its IP busy for every worker)."""
        def again() -> None:
            if not (self._closing or self._unreachable):
                installed_reactor().callLater(POLL, self._send, what, call, then)

        self.jobs.submit(what, call, then=then, failed=again)

    def _admit_ended(self) -> None:
        self._admitting -= 1
        if not self._closing:
            self.flush()

    def _admitted(self, result: tuple[int, int]) -> None:
        new, filtered = result
        if new:
            self.stats.inc_value("larbin/frontier/enqueued", new)
            self.shared_queued += new
            self._shard_next = [0.0] * len(self._shard_next)
            self._wake_engine()
        self.df.count_filtered(filtered)

    def _pop(self) -> None:
        """Start pops on up to ``POP_SHARDS`` shards whose IPs may be ready, round robin."""
        now = self.table.clock()
        count = self.shards.count
        for i in range(count):
            if self._popping >= POP_SHARDS:
                break
            k = (self._next_shard + i) % count
            if k in self._popping_shards or self._shard_next[k] > now:
                continue
            self._popping += 1
            self._popping_shards.add(k)
            call = self.fs.frontiers[k].pop_call(self.worker, POP_BATCH, self._lease_seq[k])
            seq = self.jobs.seq + 1
            self.jobs.submit("pop", call, then=partial(self._popped, k, seq=seq),
                             always=partial(self._pop_ended, k),
                             failed=partial(self._pop_failed, k))
        self._next_shard = (self._next_shard + 1) % count

    def _pop_ended(self, shard: int) -> None:
        self._popping -= 1
        self._popping_shards.discard(shard)

    def _pop_failed(self, shard: int) -> None:
        self._shard_next[shard] = self.table.clock() + POLL
        self._wake_in(POLL)

    def _popped(self, shard: int, popped: Popped, *, seq: int) -> None:
        if self._closing:  # the retirement (queued after this pop) hands these back
            return
        self._lease_seq[shard] += len(popped.leases)
        self._queued[shard] = popped.queued
        self.shared_queued = sum(self._queued)
        self.politeness.count_drop(NOCONNECTION, popped.dropped)
        self.politeness.count_drop(THROTTLED, popped.aside)
        if popped.to_wait:
            self.stats.inc_value("larbin/frontier/to_wait", popped.to_wait)
        for host in popped.unresolved:
            self.hosts.resolve(host)
        for lease, ip, record in popped.leases:
            rid = self.fs.rid(shard, lease)
            if self.ips is None:
                self._leased(shard, rid, ip, record)
            else:  # a cluster: the IP's own lease first
                giveback = self.fs.frontiers[shard].giveback_call(self.worker, lease, POLL)
                self.jobs.submit("iplease", self.ips.acquire_call(ip, f"{self.worker}/{rid}"),
                                 then=partial(self._ip_answer, shard=shard, rid=rid,
                                              lease=lease, ip=ip, record=record),
                                 failed=partial(self._send, "giveback", giveback))
        if popped.leases:
            self._changed_seq = max(self._changed_seq, seq)
        else:
            wait = POLL if popped.wait is None else min(POLL, popped.wait)
            self._shard_next[shard] = self.table.clock() + wait
            self._wake_in(wait)
        self._wake_engine()  # to hand the requests out, or to let it see it is idle

    def _ip_answer(self, wait: float, *, shard: int, rid: str, lease: str, ip: str,
                   record: bytes) -> None:
        """Cluster: the IP's own lease is ours (0), or give the record back to its shard."""
        if not wait:
            self._leased(shard, rid, ip, record)
            return
        self.stats.inc_value("larbin/distributed/ip_busy_elsewhere")
        self._send("giveback", self.fs.frontiers[shard].giveback_call(self.worker, lease, wait))

    def _leased(self, shard: int, rid: str, ip: str, record: bytes) -> None:
        request = self._hand_out(record, rid, ip)
        self._ip_shards.setdefault(ip, []).append((shard, rid))
        self.table.acquire(self.table.get(ip))
        host = host_of(request.url)
        if self.politeness.cached_ip(host) is not None:
            self.ready.append(request)
            return
        # Resolved by another worker: resolve here too, so this worker's DnsCache (which the
        # connection uses) and SSRF guard have seen the host before anything is sent.
        self.hosts.resolve_leased(host, request)

    def host_set_aside(self, host: str) -> None:
        """``host`` asked for a pause past the cap: no worker asks it again (its records go)."""
        self.releases.set_aside(host)

    def _page_complete(self, lease: Any) -> None:
        """Every child of the page is in the buffer: admit them and ack the page in one script."""
        self.acks.append(lease)
        self.flush()

    def status(self) -> dict[str, Any]:
        """For the status page (``larbinscrapy/status/``): ``Membership.status``."""
        return self.member.status()
