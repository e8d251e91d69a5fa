"""``RevisitExtension``: the continuous crawl (``LARBIN_REVISIT``).

Owns the revisit store (``store.py``) and the rule (``rule.py``). Every fetched page is given a
due time by ``ConditionalGetMiddleware`` (``middleware.py``); every tick (at most a second, or
the bucket width) the extension takes the due pages, at most ``LARBIN_REVISIT_INFLIGHT`` in the
frontier at once, and hands them to ``engine.crawl``: the scheduler's ``enqueue_request`` with
``dont_filter`` (the seen-set would refuse them), so every politeness rule still applies. While
pages are scheduled ``spider_idle`` raises ``DontCloseSpider``: the crawl runs until Ctrl-C,
``CLOSESPIDER_*`` or an engine stop. A page that stays in flight longer than
``LARBIN_REVISIT_LEASE`` (the frontier dropped it: a dead host, a refused IP) is rescheduled.

Settings: ``LARBIN_REVISIT``, ``LARBIN_REVISIT_{INTERVAL,MIN,MAX,STREAK,FACTOR,BUCKET,INFLIGHT,
LEASE}``, ``LARBIN_NEAR_DUP_DISTANCE``, ``LARBIN_CHECKPOINT_INTERVAL``, ``JOBDIR``. Files:
``JOBDIR/revisit/`` (``store.py``). Stats: ``larbin/revisit/{scheduled,due,unchanged,changed,
not_modified,failed,stale,expired,duplicates,recovered,pending}``.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.job import job_dir
from scrapy.utils.misc import load_object
from twisted.internet import task

from larbinscrapy import meta as M
from larbinscrapy.revisit.observe import observe
from larbinscrapy.revisit.rule import RevisitRule
from larbinscrapy.revisit.store import RevisitStore
from larbinscrapy.urls import fingerprint_url

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from larbinscrapy.revisit.entry import Entry

logger = logging.getLogger(__name__)

_MAX_TICK = 1.0  # seconds: how often due buckets are looked at, at most


def revisit_token(entry: Entry) -> str:
    """The ``meta[REVISIT]`` of a due page: its fingerprint and the fetch it is due for."""
    return f"{entry.fp.hex()}:{entry.fetch_count}"


def parse_token(token: str) -> tuple[bytes, int]:
    fp, _, count = token.partition(":")
    return bytes.fromhex(fp), int(count)


def _shared_frontier(settings: Any) -> bool:
    """True for the Redis scheduler: a worker could pop another worker's due page."""
    from larbinscrapy.distributed.scheduler import RedisScheduler

    scheduler = load_object(settings["SCHEDULER"])
    return isinstance(scheduler, type) and issubclass(scheduler, RedisScheduler)


class RevisitExtension:
    """Schedules every fetched page and re-queues it when due (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        store: RevisitStore,
        rule: RevisitRule,
        *,
        inflight: int,
        lease: float,
        near_distance: int,
        checkpoint_interval: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if inflight < 1:
            raise ValueError("LARBIN_REVISIT_INFLIGHT must be at least 1")
        self.crawler = crawler
        self.stats = crawler.stats
        self.store = store
        self.rule = rule
        self.inflight = inflight
        self.lease = lease
        self.near_distance = near_distance
        self.checkpoint_interval = checkpoint_interval
        self.clock = clock
        self._loops: list[task.LoopingCall] = []
        sig = crawler.signals
        sig.connect(self.spider_opened, signal=signals.spider_opened)
        sig.connect(self.spider_idle, signal=signals.spider_idle)
        sig.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevisitExtension:
        s = crawler.settings
        if not s.getbool("LARBIN_REVISIT"):
            raise NotConfigured
        if _shared_frontier(s):
            raise NotConfigured("LARBIN_REVISIT keeps its schedule per process; with the Redis "
                                "scheduler (settings.distributed) revisits are not available yet")
        rule = RevisitRule(
            initial=s.getfloat("LARBIN_REVISIT_INTERVAL"),
            minimum=s.getfloat("LARBIN_REVISIT_MIN"),
            maximum=s.getfloat("LARBIN_REVISIT_MAX"),
            streak=s.getint("LARBIN_REVISIT_STREAK"),
            factor=s.getfloat("LARBIN_REVISIT_FACTOR"),
        )
        jobdir = job_dir(s)
        store = RevisitStore(str(Path(jobdir, "revisit")) if jobdir else None,
                             s.getfloat("LARBIN_REVISIT_BUCKET"))
        return cls(
            crawler,
            store,
            rule,
            inflight=s.getint("LARBIN_REVISIT_INFLIGHT"),
            lease=s.getfloat("LARBIN_REVISIT_LEASE"),
            near_distance=s.getint("LARBIN_NEAR_DUP_DISTANCE"),
            checkpoint_interval=s.getfloat("LARBIN_CHECKPOINT_INTERVAL"),
        )

    # -- lifecycle ----------------------------------------------------------------------
    def spider_opened(self, spider: Any = None) -> None:
        self.store.open()
        self._inc("recovered", self.store.recovered)
        again = self.store.inflight()
        if again:  # handed out before the restart: the frontier may have lost them
            logger.info("revisit: %d due pages handed out again after a restart", len(again))
        for entry in again:
            self._crawl(entry)
        for interval, call in ((min(_MAX_TICK, self.store.width), self.tick),
                               (self.checkpoint_interval, self.store.checkpoint)):
            loop = task.LoopingCall(call)
            loop.start(interval, now=False)
            self._loops.append(loop)

    def spider_idle(self, spider: Any = None) -> None:
        if len(self.store):
            raise DontCloseSpider

    def spider_closed(self, spider: Any = None, reason: str = "") -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self.stats.set_value("larbin/revisit/pending", len(self.store))
        self._inc("duplicates", self.store.duplicates)
        self.store.close()

    def tick(self) -> None:
        """Reschedule what the frontier lost; hand the due pages to the frontier."""
        now = self.clock()
        for entry in self.store.expired(now, self.lease):
            self._inc("expired")
            self.store.done(entry.evolve(due=now))
        room = self.inflight - len(self.store.flight)
        if room <= 0:
            return
        for entry in self.store.take_due(now, room):
            self._inc("due")
            self._crawl(entry)

    def _crawl(self, entry: Entry) -> None:
        request = Request(
            entry.url,
            dont_filter=True,
            errback=getattr(self.crawler.spider, "on_error", None),
            meta={M.REVISIT: revisit_token(entry), "depth": entry.depth,
                  M.SITE_DEPTH: entry.site_depth},
        )
        self.crawler.engine.crawl(request)

    # -- what the middleware reports ------------------------------------------------------
    def due_entry(self, token: str) -> Entry | None:
        """The flight entry a revisit request stands for; ``None`` if it is a stale copy."""
        fp, count = parse_token(token)
        entry = self.store.in_flight(fp)
        if entry is None or entry.fetch_count != count:
            self._inc("stale")
            return None
        return entry

    def fetched(self, request: Request, response: Response) -> None:
        """Schedule the page's next fetch; tell the spider ``changed`` and ``fetch_count``."""
        meta = request.meta
        token = meta.get(M.REVISIT)
        entry = None
        if token is not None:
            entry = self.store.in_flight(parse_token(token)[0])
            if entry is None:
                return
        new, changed = observe(
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
        )
        if entry is None:
            self.store.add(new)
            self._inc("scheduled")
        else:
            self.store.done(new)
            self._inc("changed" if changed else "unchanged")
            if response.status == 304:
                self._inc("not_modified")
        meta[M.CHANGED] = changed
        meta[M.FETCH_COUNT] = new.fetch_count

    def failed(self, token: str) -> None:
        """A revisit that did not get a response: try again after the same interval."""
        entry = self.store.in_flight(parse_token(token)[0])
        if entry is not None:
            self._inc("failed")
            self.store.done(entry.evolve(due=self.clock() + entry.interval))

    def _inc(self, event: str, count: int = 1) -> None:
        if count:
            self.stats.inc_value(f"larbin/revisit/{event}", count)
