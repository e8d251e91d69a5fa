"""``InFlightSizer``: requests in flight sized from what the crawl meets, not set by hand.

Without delays a broad crawl's pages/s is its requests in flight over each one's latency. A
fixed ``CONCURRENT_REQUESTS`` is then too few on a slow web (the downloader full, the CPU idle)
or more than needed on a fast one. Every ``TICK`` seconds this grows the downloader's cap
(``Downloader.total_concurrency``, public) when the downloader was full at the tick and the
process used less than ``CPU_ROOM`` of a core since the last one: the CPU can parse more than
arrives, so more requests may wait. Growth is a quarter, at least ``STEP``, up to
``LARBIN_FETCH_IN_FLIGHT_MAX`` and the open connections' cap (``connections_max``: past it a
request only waits for a connection). It never lowers the cap: once the CPU is busy, requests
wait in the downloader instead of the frontier, under the same per-host and per-IP caps. Off
when the smaller of the two is at most ``CONCURRENT_REQUESTS`` (Scrapy's fixed cap).
Stat: ``larbin/fetch/in_flight_cap`` (the cap reached).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from larbinscrapy.lean.http1pool import connections_max

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

TICK = 1.0  # seconds between two looks: the CPU share over a second is steady enough
CPU_ROOM = 0.9  # of one core: above it, more in flight only queues work for the reactor
STEP = 8  # the least growth, so that a small start (a test's 4) grows in a few ticks
STAT = "larbin/fetch/in_flight_cap"


def grown(cap: int, most: int) -> int:
    """The next cap: a quarter more (at least ``STEP``), at most ``most``."""
    return min(most, max(cap + STEP, cap + cap // 4))


class InFlightSizer:
    """Grows ``CONCURRENT_REQUESTS`` toward ``LARBIN_FETCH_IN_FLIGHT_MAX`` (module docstring)."""

    def __init__(self, crawler: Crawler, most: int) -> None:
        self.crawler = crawler
        self.most = most
        self._loop: task.LoopingCall | None = None
        self._cpu, self._wall = time.process_time(), time.monotonic()
        crawler.signals.connect(self._opened, signal=signals.engine_started)
        crawler.signals.connect(self._closed, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> InFlightSizer:
        s = crawler.settings
        most = s.getint("LARBIN_FETCH_IN_FLIGHT_MAX")
        connections = connections_max(s.getint("LARBIN_FETCH_CONNECTIONS_MAX"))
        if connections:  # past the descriptors, a request would wait for a connection
            most = min(most, connections)
        if most <= s.getint("CONCURRENT_REQUESTS"):
            raise NotConfigured
        return cls(crawler, most)

    def _opened(self) -> None:
        self._cpu, self._wall = time.process_time(), time.monotonic()
        self._loop = task.LoopingCall(self.look)
        self._loop.start(TICK, now=False)

    def _closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def look(self) -> None:
        """One tick: grow the cap if the downloader is full and the CPU had room."""
        cpu, wall = time.process_time(), time.monotonic()
        share = (cpu - self._cpu) / max(wall - self._wall, 1e-6)
        self._cpu, self._wall = cpu, wall
        downloader = self.crawler.engine.downloader  # the loop ends with the engine
        cap = downloader.total_concurrency
        if cap >= self.most or len(downloader.active) < cap or share >= CPU_ROOM:
            return
        downloader.total_concurrency = grown(cap, self.most)
        self.crawler.stats.set_value(STAT, downloader.total_concurrency)
        logger.debug(
            "requests in flight: %d -> %d (the downloader full, %.0f%% of a core)",
            cap,
            downloader.total_concurrency,
            share * 100,
        )
