"""``CrawlLogLine``: Scrapy's LogStats line rewritten for a broad-crawl operator."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

from larbinscrapy.status.history import ITEMS, PAGES
from larbinscrapy.status.probe import frontier_status

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_FILTERED = "larbin/filtered/"


def format_line(
    stats: dict[str, Any],
    frontier: dict[str, Any] | None,
    prev: tuple[int, int, int],
    interval: float,
) -> tuple[str, tuple[int, int, int]]:
    """The log line and the counters (pages, items, filtered) the next line is relative to."""
    pages, items = int(stats.get(PAGES, 0)), int(stats.get(ITEMS, 0))
    filtered = sum(v for k, v in stats.items() if k.startswith(_FILTERED) and isinstance(v, int))
    per_min = 60.0 / interval
    parts = [
        f"Crawled {pages} pages ({(pages - prev[0]) * per_min:.0f}/min), "
        f"{items} items ({(items - prev[1]) * per_min:.0f}/min)"
    ]
    if frontier is not None:
        parts.append(_queues(frontier))
        ips = frontier.get("ips") or {}
        parts.append(
            "IPs "
            + ", ".join(
                f"{state} {ips.get(state, 0)}"
                for state in ("ready", "fetching", "cooling", "throttled", "dead")
            )
        )
    parts.append(f"filtered {filtered - prev[2]} since the last line")
    return "; ".join(parts), (pages, items, filtered)


def _queues(frontier: dict[str, Any]) -> str:
    """``queued N (…)``: its parts, each named, add up to N (the FIFOs on disk and the URLs
    held in memory, in site queues or unstorable)."""
    fifos = frontier.get("fifos")
    text = f"queued {frontier.get('queued', 0)}"
    if fifos:
        parts = [f"{name} {count}" for name, count in fifos.items()]
        in_memory = frontier.get("in_memory")
        if in_memory is not None:
            parts.append(f"in memory {in_memory}")
        text += " (" + ", ".join(parts) + ")"
    shared = frontier.get("shared")
    if shared:
        text += f" (shared: {shared.get('queued', 0)} queued, {shared.get('leased', 0)} leased)"
    sites = (frontier.get("sites") or {}).get("in_memory")
    if sites is not None:
        text += f", {sites} sites in memory"
    return text


class CrawlLogLine:
    """Logs ``format_line`` every ``LOGSTATS_INTERVAL`` seconds (see the module docstring)."""

    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval
        self.prev = (0, 0, 0)
        self._loop: task.LoopingCall | None = None
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlLogLine:
        interval = crawler.settings.getfloat("LOGSTATS_INTERVAL")
        if not interval:
            raise NotConfigured
        return cls(crawler, interval)

    def _opened(self) -> None:
        self._loop = task.LoopingCall(self.log)
        self._loop.start(self.interval, now=True)

    def log(self) -> None:
        line, self.prev = format_line(
            self.crawler.stats.get_stats(), frontier_status(self.crawler), self.prev, self.interval
        )
        logger.info("%s", line)

    def _closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        stats = self.crawler.stats
        start = stats.get_value("start_time")
        if isinstance(start, datetime):
            minutes = max((datetime.now(UTC) - start).total_seconds() / 60, 1 / 60)
            stats.set_value("responses_per_minute", stats.get_value(PAGES, 0) / minutes)
            stats.set_value("items_per_minute", stats.get_value(ITEMS, 0) / minutes)
