"""The worker's life in the shared frontier: joining, the tick, seeds, reaping, ending.

A part of ``RedisScheduler`` (``scheduler.py`` holds the way requests go in and out; this
module what happens around them, every ``POLL`` seconds and at ``open``/``close``):

* the tick (every ``min(POLL, LARBIN_REDIS_LEASE_TIMEOUT / 4)`` s) sends, in one job, the heartbeat
  (each shard reaps workers silent for ``LARBIN_REDIS_LEASE_TIMEOUT``), the seeds taken from
  ``REDIS_START_URLS_KEY``, every eighth tick the hosts some dead worker left unresolved, and
  the frontier's status when ``spider_idle`` or the status page asked for it;
* ``spider_idle`` decides on that cached status, and only if it was read after the last admit
  and the last pop that leased something and nothing is in flight (otherwise
  ``DontCloseSpider``, and ask again);
* ``close`` queues the last admit and then the retirement behind whatever is in flight.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DontCloseSpider

if TYPE_CHECKING:
    from larbinscrapy.distributed.scheduler import RedisScheduler

logger = logging.getLogger(__name__)

POLL = 0.25  # seconds: the longest a worker waits before asking Redis again when idle


class Membership:
    """The tick, heartbeat, seeds and ending of ``RedisScheduler`` (module docstring); its
    state stays on the scheduler, which it reads and changes."""

    def __init__(self, scheduler: RedisScheduler) -> None:
        self.s = scheduler
        # the heartbeat (one script per shard) every tick up to once a second: a quarter of
        # the lease timeout at most, as before, but not four times a second on 32 shards
        self.beat_every = max(1, min(round(1 / POLL),
                                     int(scheduler.lease_timeout / 4 / POLL)))

    def tick(self) -> None:
        s = self.s
        s._ticks += 1
        s.jobs.check()
        s.flush()
        if not s._ticking:  # one tick job at a time: a slow Redis does not pile them up
            s._ticking = True
            seeds = s.crawler.engine is not None and s.spider is not None
            orphans = s._ticks % 8 == 0
            status, s._want_status = s._want_status, False
            shard = s._ticks // 8 % s.fs.shards.count
            beat = s._ticks % self.beat_every == 0
            s.jobs.submit("tick", self.tick_job, seeds, orphans, status, shard, beat,
                          then=self.ticked, always=self.tick_ended)
            s._tick_seq = s.jobs.seq
        if not s.ready and s.table.clock() >= s._quiet_until():
            s._wake_engine()

    def tick_job(self, seeds: bool, orphans: bool, status: bool, shard: int,
                 beat: bool) -> tuple[Any, ...]:
        """Redis thread: heartbeat, seeds, hosts left unresolved, then the status if wanted."""
        s = self.s
        reaped = self.heartbeat_job() if beat else (0, 0)
        raw = s.fs.take_seeds(s.worker, s.seeds.batch) if seeds else []
        unresolved = s.fs.unresolved(shard) if orphans else []
        return reaped, raw, unresolved, s.fs.status() if status else None

    def tick_ended(self) -> None:
        s = self.s
        s._ticking = False

    def ticked(self, result: tuple[Any, ...]) -> None:
        s = self.s
        reaped, raw, unresolved, status = result
        self.heartbeat_done(reaped)
        if status is not None:
            s._status, s._status_seq = status, s._tick_seq
            if s._status_seq > s._changed_seq:  # nothing of ours changed it since
                s.shared_queued = status["queued"]
        if s._closing:
            return
        self.read_seeds(raw)
        for host in unresolved:
            self.s.hosts.resolve(host)  # left by a worker that died while resolving

    def heartbeat_job(self) -> tuple[int, int]:
        s = self.s
        return s.fs.heartbeat(s.worker, s.lease_timeout)

    def heartbeat_done(self, reaped: tuple[int, int]) -> None:
        s = self.s
        requeued, gone = reaped
        if gone:
            logger.warning("Reaped %d silent worker(s): %d leased requests back in the queue",
                           gone, requeued)
            s.stats.inc_value("larbin/distributed/reaped_workers", gone)
            s.stats.inc_value("larbin/distributed/requeued", requeued)
            s._shard_next = [0.0] * len(s._shard_next)

    def read_seeds(self, raw: list[bytes]) -> None:
        """Seeds taken from Redis by the tick: crawl them, then admit (which acks them)."""
        s = self.s
        engine = s._engine()
        if not raw or engine is None:
            return
        s.seeds_pending = True
        s.seeds.crawl(raw, engine.crawl, getattr(s.spider, "on_error", None))
        s.flush()

    def spider_idle(self) -> None:
        """Decides on the status the tick read, if it is newer than our last change."""
        s = self.s
        s.flush()
        if s.keep_alive:
            raise DontCloseSpider
        s._want_status = True  # for this decision or the next one
        status = s._status
        if (status is None or s._status_seq <= s._changed_seq or s.jobs.in_flight
                or s._popping):
            s._wake_in(POLL)  # the next tick reads a fresh status
            raise DontCloseSpider
        verdict = s.idle.may_close(status, bool(s.hosts.resolving), s.table.clock())
        if verdict is None:
            s._wake_in(POLL)
        if not verdict:
            raise DontCloseSpider

    # -- read-only view for the status page (larbinscrapy/status/) ---------------------------
    def status(self) -> dict[str, Any]:  # RedisScheduler.status
        """The shared frontier's sizes (last read from Redis; asks the next tick for fresh ones)
        and this worker's own buffers and IPs."""
        s = self.s
        s._want_status = True
        shared = dict(s._status or {"queued": s.shared_queued})
        return {
            "queued": len(s),
            "shared": shared,
            "in_memory": len(s.ready) + len(s.memory_only) + s._buffered,
            "sites": {"resolving": len(s.hosts.resolving)},
            "ips": s.ip_summary(),
        }
