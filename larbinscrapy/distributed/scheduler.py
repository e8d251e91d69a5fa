"""``RedisScheduler``: the local scheduler's frontier shared by many workers through Redis.

    SCRAPY_SETTINGS_MODULE=settings.distributed scrapy crawl larbin -s REDIS_URL=redis://...

The frontier (tiers, wait lists, per-site caps, per-IP readiness, leases) is ``RedisFrontier``;
this class is its Scrapy side:

* ``enqueue_request`` encodes the request (``frontier.codec``), computes its site, host and bit
  positions, and buffers it; the buffer goes to Redis in one ``admit`` script (test-and-set of
  the bits, queueing of the new ones, acknowledgement of the page that produced them) when the
  page is done (``request_done`` and every child it announced enqueued: ``PendingPages``), on a
  redirect/retry, or at the next ``next_request``;
* ``next_request`` pops a few leased requests at once (``pop``): an IP is handed to one worker
  at a time (``CONCURRENT_REQUESTS_PER_DOMAIN`` at a time when there is no delay), and is ready
  again ``delay`` after that worker reports the end of the fetch (``release``), so no two
  workers hit one IP closer than the delay. robots.txt fetches borrow the page's lease
  (``RobotsMiddleware``), so they are under the same rule;
* DNS: new hosts come back from ``pop`` as "unresolved"; the worker resolves them through its
  host gate (``politeness.ipsites``: its own ``DnsCache`` and SSRF guard) and stores the
  answer in Redis (``resolved``); a worker handed a host it never resolved resolves it before
  sending;
* a heartbeat every ``LARBIN_LEASE_TIMEOUT / 4`` s keeps this worker's leases; any worker reaps
  the leases of workers silent for ``LARBIN_LEASE_TIMEOUT`` (``kill -9``): nothing is lost;
* seeds are read from ``REDIS_START_URLS_KEY`` besides ``-a seeds=``/``-a urls=``, under the
  same rule (``distributed/seeds.py``); the shared bits drop the ones already queued;
* ending: on ``spider_idle`` the worker closes once the frontier has no queued and no leased
  record and no seed waiting, for ``LARBIN_IDLE_BEFORE_CLOSE`` s (``IdleRule``);
  ``LARBIN_KEEP_ALIVE`` keeps it waiting for seeds instead. A graceful stop (SIGINT) hands
  unacknowledged records back.

Redis is never called in the reactor thread: every round trip is a job of the worker's ordered
Redis thread (``distributed/jobs.py``). Scrapy's synchronous calls are served locally:

* ``next_request`` hands out ``ready`` (popped, resolved requests); when it is empty it starts
  one asynchronous ``pop`` (never two at once), whose result fills ``ready`` and wakes the
  engine. ``has_pending_requests`` stays true while a pop or an admit is in flight;
* ``flush`` (the admit script), ``release``, ``resolved`` are fire-and-forget; their results
  (counters, stats) are applied when they arrive. A failed job is logged and never wedges the
  worker (a failed pop is retried ``POLL`` later);
* the tick (every ``POLL`` s) sends the heartbeat and reads seeds in one job, which also reads
  the frontier's status when ``spider_idle`` asked for it; ``spider_idle`` decides on that
  cached status, and only if it was read after the last admit and the last pop that leased
  something and nothing is in flight (otherwise: ``DontCloseSpider``, and ask again);
* ``open`` and ``close`` return Deferreds (Scrapy awaits them): ``close`` queues the last admit
  and then the retirement behind whatever is in flight, and stops the thread when they are done.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any, cast

import redis
from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy_redis.connection import get_redis_from_settings
from twisted.internet import defer, task

from larbinscrapy import fatal
from larbinscrapy import meta as M
from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.distributed.frontier import NORMAL, PRIORITY, Popped, RedisFrontier
from larbinscrapy.distributed.jobs import RedisJobs
from larbinscrapy.distributed.seeds import IdleRule, RedisSeeds
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.frontier.base import FrontierScheduler
from larbinscrapy.parse.urls import host_of, site_of
from larbinscrapy.politeness.ipsites import NOCONNECTION

if TYPE_CHECKING:
    from redis import Redis
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from larbinscrapy.politeness.ipsites import IpState, IpTable

logger = logging.getLogger(__name__)

POP_BATCH = 8  # leased requests fetched from Redis per pop
FLUSH_RECORDS = 500  # buffered requests that force an admit before the page is done
POLL = 0.25  # seconds: the longest a worker waits before asking Redis again when idle


class RedisScheduler(FrontierScheduler):
    """Scrapy scheduler over ``RedisFrontier`` (see the module docstring)."""

    PRIORITY_TIER = PRIORITY
    NORMAL_TIER = NORMAL
    REQUIRES_GATE = True  # each worker resolves and checks the hosts it is handed

    def __init__(
        self,
        crawler: Crawler,
        dupefilter: RedisBitmapDupeFilter,
        server: Redis,
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
    ) -> None:
        super().__init__(crawler, dupefilter, max_per_site=max_per_site,
                         loaded_sites=loaded_sites, priority_extensions=priority_extensions,
                         local_table=local_table)
        self.server = server
        self.redis_where = redis_where or fatal.redis_location(server)  # for messages
        self._unreachable = False
        self.frontier_key = frontier_key
        self.seeds = seeds
        self.lease_timeout = lease_timeout
        self.idle = IdleRule(idle_before_close)
        self.keep_alive = keep_alive
        self.persist = persist
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.frontier: RedisFrontier
        self.buffer: list[tuple[int, list[int], bytes]] = []
        self.acks: list[str] = []
        self.seeds_pending = False
        self.ready: deque[Request] = deque()  # leased, resolved, not yet handed to the engine
        self.resolving: set[str] = set()
        self.shared_queued = 0
        self._lease_seq = 0
        self._quiet_until = 0.0
        self._loop: task.LoopingCall | None = None
        self._ticks = 0
        self._pop_seq = 0
        self._tick_seq = 0
        self.jobs = RedisJobs(server=server, outage_timeout=outage_timeout,
                              on_outage=self._outage, stats=crawler.stats)
        self._popping = False
        self._admitting = 0
        self._ticking = False
        self._closing = False
        self._status: dict[str, int] | None = None  # the last status read by a tick
        self._want_status = False  # spider_idle asked the next tick for one
        self._status_seq = 0  # the job that read it
        self._changed_seq = 0  # the last job that may have queued or leased records

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
        return cls(
            crawler,
            server=get_redis_from_settings(s),
            redis_where=fatal.redacted(s.get("REDIS_URL") or ""),
            frontier_key=s["LARBIN_REDIS_FRONTIER_KEY"] % names,
            seeds=seeds,
            lease_timeout=s.getfloat("LARBIN_LEASE_TIMEOUT"),
            idle_before_close=s.getfloat("LARBIN_IDLE_BEFORE_CLOSE"),
            keep_alive=s.getbool("LARBIN_KEEP_ALIVE"),
            persist=s.getbool("SCHEDULER_PERSIST"),
            outage_timeout=s.getfloat("LARBIN_REDIS_OUTAGE_TIMEOUT"),
            **common,
        )

    # -- Scrapy's scheduler contract ------------------------------------------------------
    def open(self, spider: Spider) -> defer.Deferred[None]:
        self.spider = spider
        self._connect()
        self.jobs.start()
        delay = self.table.default_delay
        self.frontier = RedisFrontier(
            self.server,
            self.frontier_key,
            max_per_site=self.max_per_site,
            loaded_sites=self.loaded_sites,
            connections=1 if delay > 0 else self.table.max_connections,
        )
        # the send-time gate gives a lease back exactly when a request we leased ends
        self.table.add_release_listener(self._released)
        self.crawler.signals.connect(self._spider_idle, signal=signals.spider_idle)

        def join() -> tuple[tuple[int, int], dict[str, int]]:
            return self._heartbeat_job(), self.frontier.status(self.seeds.key)

        # Not submit: a failure here must fail the start (Scrapy awaits this Deferred).
        d = self.jobs.run(join)
        d.addCallbacks(self._joined, self._join_failed)
        return d

    def _join_failed(self, failure: Failure) -> None:
        """Redis is not there: one line naming it, and the crawl ends (``fatal``), exit 1."""
        failure.trap(redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self._unreachable = True
        fatal.stop(self.crawler, fatal.REDIS_UNREACHABLE,
                   f"cannot reach Redis at {self.redis_where}: {failure.getErrorMessage()}")

    def _outage(self, detail: str) -> None:
        """Redis stayed away (``RedisJobs``): stop, one line; its state waits in Redis."""
        self._unreachable = True
        fatal.stop(self.crawler, fatal.REDIS_UNREACHABLE,
                   f"Redis at {self.redis_where} {detail}: stopping this worker; what it had "
                   f"leased goes back to the queue in Redis (LARBIN_LEASE_TIMEOUT)")

    def _joined(self, result: tuple[tuple[int, int], dict[str, int]]) -> None:
        reaped, status = result
        self._heartbeat_done(reaped)
        self.shared_queued = status["queued"]
        logger.info("Worker %s joined frontier %s: %d queued, %d leased, %d seeds waiting",
                    self.worker, self.frontier_key, status["queued"], status["leased"],
                    status["seeds"])
        self._loop = task.LoopingCall(self._tick)
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
        self.flush()

        def retire() -> tuple[int, dict[str, int], int | None]:
            requeued = self.frontier.retire(self.worker, self.seeds.key)
            status = self.frontier.status(self.seeds.key)
            bits = self.df.bits_set() if self.df.stats is not None else None
            if reason == "finished" and not self.persist and not status["workers"]:
                self.frontier.delete()
                self.server.delete(self.df.key)
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
        return bool(self.ready or self.memory_only or self.buffer or self.shared_queued > 0
                    or self._popping or self._admitting)

    def __len__(self) -> int:
        return len(self.ready) + len(self.memory_only) + len(self.buffer) + self.shared_queued

    def _enqueue(self, request: Request, previous: Any, *, seen_test: bool) -> bool:
        record = self._encode(request)
        if record is not None:
            positions = self.df.request_positions(request) if seen_test else []
            url = request.url
            entry = self.frontier.entry(site_of(url), host_of(url), record)
            self.buffer.append((self._tier(request), positions, entry))
        if previous is not None:
            self.acks.append(previous)
            self.flush()
        elif len(self.buffer) >= FLUSH_RECORDS:
            self.flush()
        return True

    def next_request(self) -> Request | None:
        if self.memory_only:
            return self.memory_only.popleft()
        if not self.ready:
            self.flush()
            if not self._popping and self.table.clock() >= self._quiet_until:
                self._pop()
        if self.ready:
            self.stats.inc_value("larbin/frontier/dequeued")
            return self.ready.popleft()
        return None

    # -- to and from Redis -----------------------------------------------------------------
    def flush(self) -> None:
        """Admit the buffered requests and send the pending acknowledgements: one script."""
        if not (self.buffer or self.acks or self.seeds_pending):
            return
        buffer, acks, seeds = self.buffer, self.acks, self.seeds_pending
        self.buffer, self.acks, self.seeds_pending = [], [], False
        self._admitting += 1
        call = self.frontier.admit_call(self.worker, self.df.key, self.df.shard_bits, buffer,
                                        acks, seeds)
        self.jobs.submit("admit", call, then=self._admitted, always=self._admit_ended)
        self._changed_seq = self.jobs.seq

    def _admit_ended(self) -> None:
        self._admitting -= 1

    def _admitted(self, result: tuple[int, int]) -> None:
        new, filtered = result
        if new:
            self.stats.inc_value("larbin/frontier/enqueued", new)
            self.shared_queued += new
            self._quiet_until = 0.0
            self._wake_engine()
        self.df.count_filtered(filtered)

    def _pop(self) -> None:
        """Start one pop (the caller checked that none is in flight)."""
        self._popping = True
        self.jobs.submit("pop", self.frontier.pop_call(self.worker, POP_BATCH, self._lease_seq),
                         then=self._popped, always=self._pop_ended, failed=self._pop_failed)
        self._pop_seq = self.jobs.seq

    def _pop_ended(self) -> None:
        self._popping = False

    def _pop_failed(self) -> None:
        self._quiet_until = self.table.clock() + POLL
        self._wake_in(POLL)

    def _popped(self, popped: Popped) -> None:
        if self._closing:  # the retirement (queued after this pop) hands these back
            return
        self._lease_seq += len(popped.leases)
        self.shared_queued = popped.queued
        self.politeness.count_drop(NOCONNECTION, popped.dropped)
        if popped.to_wait:
            self.stats.inc_value("larbin/frontier/to_wait", popped.to_wait)
        for host in popped.unresolved:
            self._resolve(host)
        for lease, ip, record in popped.leases:
            self._leased(lease, ip, record)
        if popped.leases:
            self._changed_seq = max(self._changed_seq, self._pop_seq)
        else:
            wait = POLL if popped.wait is None else min(POLL, popped.wait)
            self._quiet_until = self.table.clock() + wait
            self._wake_in(wait)
        self._wake_engine()  # to hand the requests out, or to let it see it is idle

    def _leased(self, lease: str, ip: str, record: bytes) -> None:
        request = self._hand_out(record, lease, ip)
        self.table.acquire(self.table.get(ip))
        host = host_of(request.url)
        if self.politeness.cached_ip(host) is not None:
            self.ready.append(request)
            return
        # Resolved by another worker: resolve here too, so this worker's DnsCache (which the
        # connection uses) and SSRF guard have seen the host before anything is sent.
        d = self.politeness.resolve(host)
        d.addCallbacks(self._resolved_here, self._unresolved_here,
                       callbackArgs=(request,), errbackArgs=(request,))

    def _resolved_here(self, ip: str, request: Request) -> None:
        if ip != request.meta[M.IP]:
            self.stats.inc_value("larbin/distributed/dns_mismatch")
        self.ready.append(request)
        self._wake_engine()

    def _unresolved_here(self, failure: Failure, request: Request) -> None:
        failure.trap(DroppedRequest)
        self.politeness.count_drop(cast("DroppedRequest", failure.value).reason)
        self.politeness.lease_returned(request.meta.pop(M.LEASE))
        self.acks.append(request.meta[M.RID])
        self.flush()

    def _resolve(self, host: str) -> None:
        if host in self.resolving:
            return
        self.resolving.add(host)
        d = self.politeness.resolve(host)
        d.addCallbacks(self._host_resolved, self._host_failed,
                       callbackArgs=(host,), errbackArgs=(host,))

    def _host_resolved(self, ip: str, host: str) -> None:
        # ``host`` stays in ``resolving`` until Redis has the answer (no second lookup).
        self.jobs.submit("resolved", self.frontier.resolved_call(host, ip),
                         then=self._host_stored, always=lambda: self.resolving.discard(host))

    def _host_stored(self, _: Any) -> None:
        self._quiet_until = 0.0
        self._wake_engine()

    def _host_failed(self, failure: Failure, host: str) -> None:
        failure.trap(DroppedRequest)
        reason = self.politeness.host_dropped(host, failure)

        def count(result: tuple[str, int]) -> None:
            self.politeness.count_drop(reason, result[1])

        self.jobs.submit("resolved", self.frontier.resolved_call(host, None, reason),
                         then=count, always=lambda: self.resolving.discard(host))

    def _released(self, st: IpState) -> None:
        """A leased fetch on ``st`` ended: the IP is ready again after its delay, for everyone.

        Queued in the Redis thread before any later pop (this worker's) can run; the delay
        counts from when Redis runs it, so the IP is never ready earlier than here."""
        # The shared frontier knows IPs only: the IP waits for the host just fetched too, so
        # another worker cannot reach that host before its DOWNLOAD_DELAY.
        delay = max(0.0, self.table.next_start(st, st.last_host) - self.table.clock())
        self.jobs.submit("release", self.frontier.release_call(self.worker, st.ip, delay,
                                                               st.dead),
                         then=self._release_done)
        self._quiet_until = min(self._quiet_until, self.table.clock() + delay)

    def _release_done(self, dropped: int) -> None:
        self.politeness.count_drop(NOCONNECTION, max(0, dropped))

    def _page_complete(self, lease: Any) -> None:
        """Every child of the page is in the buffer: admit them and ack the page in one script."""
        self.acks.append(lease)
        self.flush()

    # -- seeds, heartbeat, ending ----------------------------------------------------------
    def _tick(self) -> None:
        self._ticks += 1
        self.jobs.check()
        self.flush()
        if not self._ticking:  # one tick job at a time: a slow Redis does not pile them up
            self._ticking = True
            seeds = self.crawler.engine is not None and self.spider is not None
            orphans = self._ticks % 8 == 0
            status, self._want_status = self._want_status, False
            self.jobs.submit("tick", self._tick_job, seeds, orphans, status, then=self._ticked,
                             always=self._tick_ended)
            self._tick_seq = self.jobs.seq
        if not self.ready and self.table.clock() >= self._quiet_until:
            self._wake_engine()

    def _tick_job(self, seeds: bool, orphans: bool, status: bool) -> tuple[Any, ...]:
        """Redis thread: heartbeat, seeds, hosts left unresolved, then the status if wanted."""
        reaped = self._heartbeat_job()
        key = self.seeds.key
        raw = self.frontier.take_seeds(self.worker, key, self.seeds.batch) if seeds else []
        unresolved = self.frontier.unresolved() if orphans else []
        return reaped, raw, unresolved, self.frontier.status(key) if status else None

    def _tick_ended(self) -> None:
        self._ticking = False

    def _ticked(self, result: tuple[Any, ...]) -> None:
        reaped, raw, unresolved, status = result
        self._heartbeat_done(reaped)
        if status is not None:
            self._status, self._status_seq = status, self._tick_seq
            if self._status_seq > self._changed_seq:  # nothing of ours changed it since
                self.shared_queued = status["queued"]
        if self._closing:
            return
        self._read_seeds(raw)
        for host in unresolved:
            self._resolve(host)  # left by a worker that died while resolving

    def _heartbeat_job(self) -> tuple[int, int]:
        return self.frontier.heartbeat(self.worker, self.lease_timeout, self.seeds.key)

    def _heartbeat_done(self, reaped: tuple[int, int]) -> None:
        requeued, gone = reaped
        if gone:
            logger.warning("Reaped %d silent worker(s): %d leased requests back in the queue",
                           gone, requeued)
            self.stats.inc_value("larbin/distributed/reaped_workers", gone)
            self.stats.inc_value("larbin/distributed/requeued", requeued)
            self._quiet_until = 0.0

    def _read_seeds(self, raw: list[bytes]) -> None:
        """Seeds taken from Redis by the tick: crawl them, then admit (which acks them)."""
        engine = self._engine()
        if not raw or engine is None:
            return
        self.seeds_pending = True
        self.seeds.crawl(raw, engine.crawl, getattr(self.spider, "on_error", None))
        self.flush()

    def _spider_idle(self) -> None:
        """Decides on the status the tick read, if it is newer than our last change."""
        self.flush()
        if self.keep_alive:
            raise DontCloseSpider
        self._want_status = True  # for this decision or the next one
        status = self._status
        if (status is None or self._status_seq <= self._changed_seq or self.jobs.in_flight
                or self._popping):
            self._wake_in(POLL)  # the next tick reads a fresh status
            raise DontCloseSpider
        verdict = self.idle.may_close(status, bool(self.resolving), self.table.clock())
        if verdict is None:
            self._wake_in(POLL)
        if not verdict:
            raise DontCloseSpider

    # -- read-only view for the status page (larbinscrapy/status/) ---------------------------
    def status(self) -> dict[str, Any]:
        """The shared frontier's sizes (last read from Redis; asks the next tick for fresh ones)
        and this worker's own buffers and IPs."""
        self._want_status = True
        shared = dict(self._status or {"queued": self.shared_queued})
        return {
            "queued": len(self),
            "shared": shared,
            "in_memory": len(self.ready) + len(self.memory_only) + len(self.buffer),
            "sites": {"resolving": len(self.resolving)},
            "ips": self.ip_summary(),
        }
