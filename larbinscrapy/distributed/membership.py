"""The worker's life in the shared frontier: the tick, heartbeat, seeds and reaping.

A part of ``RedisScheduler`` (``pops.py`` and ``admits.py`` hold the way requests go out and
in; this module what happens around them, every ``POLL`` seconds and at ``open``):

* the tick (every ``min(POLL, LARBIN_REDIS_LEASE_TIMEOUT / 4)`` s) sends, in one job, the heartbeat
  (each shard reaps workers silent for ``LARBIN_REDIS_LEASE_TIMEOUT``; the command for every
  worker, ``allworkers.py``, is read in its round trip), the seeds taken from
  ``REDIS_START_URLS_KEY``, every eighth tick the hosts some dead worker left unresolved, and
  the frontier's status when ``spider_idle`` or the status page asked for it (``SharedView``);
  a worker that idles (every shard empty: ``ShardClock.idle``) sends it ever less often, up to
  every ``IDLE_POLL_MAX`` s (``TickPace``);
* the ending rule, on that status: ``ending.py``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from twisted.internet import task

from larbinscrapy.distributed.link import POLL
from larbinscrapy.distributed.readiness import IDLE_POLL_MAX

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from larbinscrapy.distributed.admits import Admits
    from larbinscrapy.distributed.allworkers import AllWorkersControl
    from larbinscrapy.distributed.hosts import HostResolution
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.distributed.pops import Pops
    from larbinscrapy.distributed.readiness import ShardClock
    from larbinscrapy.distributed.seeds import RedisSeeds
    from larbinscrapy.distributed.view import SharedView

__all__ = ["POLL", "Membership", "TickPace"]

logger = logging.getLogger(__name__)


class TickPace:
    """Which ticks send their job and carry the heartbeat. The heartbeat (one script a shard)
    every tick up to once a second, a quarter of the lease timeout at most. While the worker
    idles (every shard empty, nothing ready or buffered, no status asked for) a job every
    ``gap`` ticks, the gap doubling up to ``IDLE_POLL_MAX`` (the heartbeat still within a quarter
    of the lease timeout): an idle worker does not poll Redis hard."""

    def __init__(self, lease_timeout: float) -> None:
        quarter = int(lease_timeout / 4 / POLL)
        self.beat_every = max(1, min(round(1 / POLL), quarter))
        self.gap_max = max(1, min(round(IDLE_POLL_MAX / POLL), quarter))
        self.gap = 1
        self.ticks = 0
        self.sent = 0  # tick jobs sent
        self.sent_at = 0  # the tick that sent the last one
        self.beat_at = 0  # the tick that sent the last heartbeat

    def due(self, idle: bool) -> bool:
        """Whether this tick sends its job (counted as sent)."""
        if not idle:
            self.gap = 1
        elif self.ticks - self.sent_at < self.gap:
            return False
        else:
            self.gap = min(2 * self.gap, self.gap_max)
        self.sent_at = self.ticks
        self.sent += 1
        return True

    def beat(self) -> bool:
        """Whether the job about to be sent carries the heartbeat."""
        if self.ticks - self.beat_at < self.beat_every:
            return False
        self.beat_at = self.ticks
        return True


class Membership:
    """The tick, heartbeat, seeds and reaping of one worker (module docstring)."""

    def __init__(
        self,
        link: FrontierLink,
        *,
        lease_timeout: float,
        seeds: RedisSeeds,
        admits: Admits,
        pops: Pops,
        hosts: HostResolution,
        view: SharedView,
        clock: ShardClock,
        control: AllWorkersControl,
        stats: StatsCollector,
        now: Callable[[], float],
        engine: Callable[[], Any],
        wake: Callable[[], None],
    ) -> None:
        self.link = link
        self.lease_timeout = lease_timeout
        self.seeds = seeds
        self.admits = admits
        self.pops = pops
        self.hosts = hosts
        self.view = view
        self.clock = clock
        self.control = control
        self.stats = stats
        self.now = now  # the politeness table's clock
        self.engine = engine  # the crawl's engine, or None
        self.wake = wake
        self.pace = TickPace(lease_timeout)
        self.spider: Spider | None = None  # ``start``: seeds are read once there is one
        self.ticking = False  # a tick job in flight
        self.loop: task.LoopingCall | None = None
        self.closing = False

    def start(self, spider: Spider | None) -> None:
        """Joined: tick every ``min(POLL, LARBIN_REDIS_LEASE_TIMEOUT / 4)`` s."""
        self.spider = spider
        self.loop = task.LoopingCall(self.tick)
        self.loop.start(min(POLL, self.lease_timeout / 4), now=False)

    def close(self) -> None:
        self.closing = True
        if self.loop is not None and self.loop.running:
            self.loop.stop()

    def tick(self) -> None:
        pace = self.pace
        pace.ticks += 1
        jobs = self.link.jobs
        jobs.check()
        self.admits.flush()
        idle = (
            not self.pops.ready
            and not self.admits.buffered
            and not self.view.wanted
            and self.clock.idle(self.now())
        )
        # one tick job at a time: a slow Redis does not pile them up
        if not self.ticking and pace.due(idle):
            self.ticking = True
            seeds = self.engine() is not None and self.spider is not None
            orphans = pace.sent % 8 == 0
            status = self.view.take_want()
            shard = pace.sent // 8 % self.link.shards.count
            beat = pace.beat()
            jobs.submit(
                "tick",
                self.tick_job,
                seeds,
                orphans,
                status,
                shard,
                beat,
                then=self.ticked,
                always=self.tick_ended,
            )
            self.view.tick_sent(jobs.seq)
        if not self.pops.ready and self.now() >= self.clock.quiet_until():
            self.wake()

    def tick_job(
        self, seeds: bool, orphans: bool, status: bool, shard: int, beat: bool
    ) -> tuple[Any, ...]:
        """Redis thread: heartbeat, seeds, hosts left unresolved, then the status if wanted."""
        fs = self.link.fs
        reaped = self.heartbeat_job() if beat else None
        raw = fs.take_seeds(self.link.worker, self.seeds.batch) if seeds else []
        unresolved = fs.unresolved(shard) if orphans else []
        return reaped, raw, unresolved, fs.status() if status else None

    def tick_ended(self) -> None:
        self.ticking = False

    def ticked(self, result: tuple[Any, ...]) -> None:
        reaped, raw, unresolved, status = result
        self.heartbeat_done(reaped)
        if status is not None:
            self.view.read(status)
        if self.closing:
            return
        self.read_seeds(raw)
        for host in unresolved:
            self.hosts.resolve(host)  # left by a worker that died while resolving

    def heartbeat_job(self) -> tuple[tuple[int, int], tuple[str, int]]:
        """Redis thread: the heartbeat, and the command for every worker in its round trip."""
        link = self.link
        return link.fs.heartbeat_with(link.worker, self.lease_timeout, self.control.read_call())

    def heartbeat_done(
        self, beat: tuple[tuple[int, int], tuple[str, int]] | None, joining: bool = False
    ) -> None:
        if beat is None:  # this tick sent no heartbeat
            return
        (requeued, gone), command = beat
        if joining:
            self.control.joined(command)
        else:
            self.control.read(command)
        if gone:
            logger.warning(
                "Reaped %d silent worker(s): %d leased requests back in the queue", gone, requeued
            )
            self.stats.inc_value("larbin/distributed/reaped_workers", gone)
            self.stats.inc_value("larbin/distributed/requeued", requeued)
            self.clock.all_now()

    def read_seeds(self, raw: list[bytes]) -> None:
        """Seeds taken from Redis by the tick: crawl them, then admit (which acks them)."""
        engine = self.engine()
        if not raw or engine is None:
            return
        self.admits.seeds_taken()
        self.seeds.crawl(raw, engine.crawl, getattr(self.spider, "on_error", None))
        self.admits.flush()
