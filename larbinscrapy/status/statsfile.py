"""The crawl's stats as a JSON file (``LARBIN_STATS_FILE``), rewritten atomically: larbin's status
page for scripts, tests and benchmarks."""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class StatsFile:
    """Writes ``crawler.stats`` to ``LARBIN_STATS_FILE`` as JSON."""

    def __init__(self, crawler: Crawler, path: str, interval: float) -> None:
        self.crawler = crawler
        self.path = path
        self.interval = interval
        self._loop: task.LoopingCall | None = None
        self._failing = False  # the last write failed: its line is logged, not the next ones
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        path = crawler.settings.get("LARBIN_STATS_FILE")
        if not path:
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        return cls(crawler, path, crawler.settings.getfloat("LARBIN_STATS_INTERVAL"))

    def _opened(self) -> None:
        if self.interval > 0:
            self._loop = task.LoopingCall(self.write)
            self._loop.start(self.interval, now=False)

    def _closed(self, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.write(finish_reason=reason)

    def write(self, **extra: Any) -> None:
        """Rewrite the file; a failure (EMFILE, a full disk) is counted and the next tick
        tries again: the crawl does not depend on this file."""
        stats = {**self.crawler.stats.get_stats(), **extra}
        tmp = f"{self.path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(stats, f, default=str, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            self.crawler.stats.inc_value("larbin/status/stats_file_failed")
            if not self._failing:
                logger.warning("cannot write the stats file %s: %s (trying again)", self.path, exc)
            self._failing = True
            return
        if self._failing:
            logger.info("the stats file %s is written again", self.path)
        self._failing = False
