"""``RevisitExtension``: the continuous crawl (``LARBIN_REVISIT``)."""

from __future__ import annotations

import logging
import random
import time
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.job import job_dir
from scrapy.utils.misc import load_object
from twisted.internet import defer, task

from larbinscrapy import meta as M
from larbinscrapy.fatal import retrieve_task_exception
from larbinscrapy.parse.urls import fingerprint_url
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.revisit.entry import ERROR, Entry
from larbinscrapy.revisit.observe import GONE_STATUSES, observe
from larbinscrapy.revisit.rule import RevisitRule, bucket_width

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.internet.base import DelayedCall

    from larbinscrapy.reactor import Clock
    from larbinscrapy.revisit.backends import LocalSchedule, SharedSchedule

    Schedule = LocalSchedule | SharedSchedule

logger = logging.getLogger(__name__)

_MAX_TICK = 1.0  # seconds: how often due pages are looked for, at most


def revisit_token(entry: Entry) -> str:
    """The ``meta[REVISIT]`` of a due page: its packed entry, so any worker can revisit it."""
    return entry.pack().hex()


def parse_token(token: str) -> Entry:
    return Entry.unpack(bytes.fromhex(token))


def _shared_frontier(settings: BaseSettings) -> bool:
    """True for the Redis scheduler: the schedule must then be shared too."""
    from larbinscrapy.distributed.scheduler import RedisScheduler

    scheduler = load_object(settings["SCHEDULER"])
    return isinstance(scheduler, type) and issubclass(scheduler, RedisScheduler)


def _local_schedule(
    s: BaseSettings, rule: RevisitRule, inflight: int, lease: float, inc: Callable[..., None]
) -> LocalSchedule:
    """The schedule in ``JOBDIR/revisit/``, opened now: one that cannot be read stops the crawl
    before it starts."""
    from larbinscrapy.revisit.backends import LocalSchedule
    from larbinscrapy.revisit.store import RevisitStore

    jobdir = job_dir(s)
    bucket = s.getfloat("LARBIN_REVISIT_BUCKET")
    local = RevisitStore(
        str(Path(jobdir, "revisit")) if jobdir else None,
        bucket_width(bucket, rule.minimum),
        legacy_width=bucket,
    )
    schedule = LocalSchedule(local, inflight, lease, inc)
    try:
        schedule.open()
    except (OSError, ValueError) as exc:
        logger.error("revisit: cannot open the schedule in %s: %s", local.dir, exc)
        retrieve_task_exception()
        raise
    return schedule


def _rule(s: BaseSettings) -> RevisitRule:
    return RevisitRule(
        initial=s.getfloat("LARBIN_REVISIT_INTERVAL"),
        minimum=s.getfloat("LARBIN_REVISIT_INTERVAL_MIN"),
        maximum=s.getfloat("LARBIN_REVISIT_INTERVAL_MAX"),
        streak=s.getint("LARBIN_REVISIT_STREAK"),
        factor=s.getfloat("LARBIN_REVISIT_FACTOR"),
    )


class RevisitExtension:
    """Schedules every fetched page and re-queues it when due (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        rule: RevisitRule,
        *,
        near_distance: int,
        checkpoint_interval: float,
        gone_interval: float,
        errors_max: int = 0,
        clock: Callable[[], float] = time.time,
        timer: Clock | None = None,
    ) -> None:
        self.crawler = crawler
        self.gone_interval = gone_interval  # 404/410 pages: seconds to their next fetch; 0 never
        self.errors_max = errors_max  # 5xx answers in a row before a page leaves; 0 never
        self.stats = crawler.stats
        self.rule = rule
        self.near_distance = near_distance
        self.checkpoint_interval = checkpoint_interval
        self.clock = clock
        self.timer = timer  # the reactor's clock for the loops (a test's task.Clock)
        self.schedule: Schedule
        self._loops: list[task.LoopingCall] = []
        self._next_tick: DelayedCall | None = None
        self._jitter = random.Random()  # this worker's own tick phase
        self._taking = False
        sig = crawler.signals
        sig.connect(self.spider_opened, signal=signals.spider_opened)
        sig.connect(self.spider_idle, signal=signals.spider_idle)
        sig.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevisitExtension:
        s = crawler.settings
        if not s.getbool("LARBIN_REVISIT"):
            raise NotConfigured
        rule = _rule(s)
        inflight, lease = s.getint("LARBIN_REVISIT_INFLIGHT"), s.getfloat("LARBIN_REVISIT_LEASE")
        if inflight < 1:
            raise ValueError("LARBIN_REVISIT_INFLIGHT must be at least 1")
        ext = cls(
            crawler,
            rule,
            near_distance=s.getint("LARBIN_CONTENT_DUP_NEAR_DISTANCE"),
            checkpoint_interval=s.getfloat("LARBIN_FRONTIER_CHECKPOINT_INTERVAL"),
            gone_interval=s.getfloat("LARBIN_REVISIT_GONE_INTERVAL"),
            errors_max=s.getint("LARBIN_REVISIT_ERRORS_MAX"),
        )
        # here, not at the top: Scrapy imports this class for every crawl, revisits on or off
        from larbinscrapy.revisit.backends import SharedSchedule

        if _shared_frontier(s):
            from larbinscrapy.distributed.connection import connector
            from larbinscrapy.distributed.shards import HostShards
            from larbinscrapy.revisit.redis_store import RedisRevisitStore

            name = crawler.spidercls.name
            key = s.get("LARBIN_REDIS_REVISIT_KEY") % {"spider": name, "name": name}
            server, connect, shards = connector(s)  # one Redis, or a cluster (made in its thread)
            store = RedisRevisitStore(
                server, key, inflight, connect=connect, shards=HostShards(shards)
            )  # the frontier's shards
            ext.schedule = SharedSchedule(store, lease, ext._inc)
        else:
            ext.schedule = _local_schedule(s, rule, inflight, lease, ext._inc)
        return ext

    # -- lifecycle ----------------------------------------------------------------------
    def spider_opened(self, spider: Any = None) -> None:
        again = self.schedule.open()
        if again:  # handed out before the restart: the frontier may have lost them
            logger.info("revisit: %d due pages handed out again after a restart", len(again))
        for entry in again:
            self._crawl(entry)
        loop = task.LoopingCall(self.schedule.checkpoint)
        loop.clock = self._timer()  # type: ignore[assignment]  # the zope interface
        loop.start(self.checkpoint_interval, now=False)
        self._loops.append(loop)
        self._tick_later()

    def _timer(self) -> Clock:
        if self.timer is None:
            self.timer = installed_reactor()
        return self.timer

    def _tick_later(self) -> None:
        """The next tick, a random 0.5-1.5 tick interval away: workers sharing a schedule whose
        fixed ticks stayed a few ms apart would leave every due page to the earlier one."""
        interval = min(_MAX_TICK, self.schedule.tick_interval)
        self._next_tick = self._timer().callLater(
            interval * self._jitter.uniform(0.5, 1.5), self._tick_and_again
        )

    def _tick_and_again(self) -> None:
        self._next_tick = None
        try:
            self.tick()
        finally:
            self._tick_later()

    def spider_idle(self, spider: Any = None) -> None:
        if self.schedule.pending():
            raise DontCloseSpider

    def spider_closed(self, spider: Any = None, reason: str = "") -> None:
        if self._next_tick is not None and self._next_tick.active():
            self._next_tick.cancel()
        self._next_tick = None
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self.stats.set_value("larbin/revisit/pending", len(self.schedule))
        self.schedule.close()

    def tick(self) -> None:
        """Hand the due pages (and those the frontier lost) to the frontier; one take at a time."""
        if self._taking:
            return
        self._taking = True
        self.stats.set_value("larbin/revisit/pending", len(self.schedule))  # the status file
        d = self.schedule.take(self.clock())
        d.addCallback(self._taken)
        d.addErrback(self._take_failed)
        d.addBoth(self._took)

    def _taken(self, entries: list[Entry]) -> None:
        for entry in entries:
            self._inc("due")
            self._crawl(entry)

    def _take_failed(self, failure: Any) -> None:
        self._inc("take_failed")
        logger.error("revisit: taking due pages failed: %s", failure.getErrorMessage())

    def _took(self, _: Any) -> None:
        self._taking = False

    def _crawl(self, entry: Entry) -> None:
        request = Request(
            entry.url,
            dont_filter=True,
            errback=getattr(self.crawler.spider, "on_error", None),
            meta={
                M.REVISIT: revisit_token(entry),
                "depth": entry.depth,
                M.SITE_DEPTH: entry.site_depth,
            },
        )
        self.crawler.engine.crawl(request)

    # -- what the middleware reports ------------------------------------------------------
    def due_entry(self, token: str) -> defer.Deferred[Entry | None]:
        """The entry a revisit request stands for; ``None`` if it is a stale copy."""

        def checked(entry: Entry | None) -> Entry | None:
            if entry is None:
                self._inc("stale")
            return entry

        return self.schedule.due(parse_token(token)).addCallback(checked)

    def fetched(self, request: Request, response: Response) -> defer.Deferred[bool]:
        """Schedule the page's next fetch; tell the spider ``changed`` and ``fetch_count``."""
        meta = request.meta
        token = meta.get(M.REVISIT)
        entry = self.schedule.current(parse_token(token)) if token is not None else None
        if token is not None and entry is None:
            self._inc("stale")
            return defer.succeed(False)
        if not self.gone_interval and response.status in GONE_STATUSES:  # never revisited
            if entry is None:
                self._inc("gone")
                return defer.succeed(False)
            return self.schedule.forget(entry).addCallback(self._counted, "gone", "stale")
        new, changed = self._observe(entry, meta, response)
        meta[M.CHANGED] = changed
        meta[M.FETCH_COUNT] = new.fetch_count
        if new.flags & ERROR and self.errors_max and new.streak >= self.errors_max:
            self._inc("server_error")  # the last one in a row allowed: no more revisits
            if entry is None:
                self._inc("server_error_dropped")
                return defer.succeed(False)
            return self.schedule.forget(entry).addCallback(
                self._counted, "server_error_dropped", "stale"
            )
        if entry is None:
            return self.schedule.add(new).addCallback(self._counted, "scheduled", "duplicates")
        event = "server_error" if new.flags & ERROR else "changed" if changed else "unchanged"
        if response.status == HTTPStatus.NOT_MODIFIED:
            self._inc("not_modified")
        return self.schedule.done(entry, new).addCallback(self._counted, event, "stale")

    def _observe(
        self, entry: Entry | None, meta: dict[str, Any], response: Response
    ) -> tuple[Entry, bool]:
        """The page's next entry, and whether it changed (``observe``)."""
        return observe(
            entry,
            fp=entry.fp if entry else fingerprint_url(response.url),
            url=entry.url if entry else response.url,
            status=response.status,
            body=response.body,
            headers=response.headers,
            now=self.clock(),
            rule=self.rule,
            near_distance=self.near_distance,
            hint=meta.get(M.REVISIT_HINT),
            depth=meta.get("depth", 0),
            site_depth=meta.get(M.SITE_DEPTH, 0),
            gone=self.gone_interval or None,
        )

    def failed(self, token: str) -> defer.Deferred[bool]:
        """A revisit that got no response: try again after the same interval."""
        entry = parse_token(token)
        again = entry.evolve(due=self.clock() + entry.interval)
        return self.schedule.done(entry, again).addCallback(self._counted, "failed", "stale")

    def _counted(self, applied: bool, event: str, otherwise: str) -> bool:
        self._inc(event if applied else otherwise)
        return applied

    def _inc(self, event: str, count: int = 1) -> None:
        if count:
            self.stats.inc_value(f"larbin/revisit/{event}", count)
