"""Read-only looks into a running crawl for the status page and the log line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def scheduler_of(crawler: Crawler) -> Any:
    """The running crawl's scheduler, or None (no engine yet, or the crawl is over)."""
    engine = getattr(crawler, "engine", None)
    return None if engine is None else engine.scheduler


def frontier_status(crawler: Crawler) -> dict[str, Any] | None:
    """The scheduler's ``status()`` (larbinscrapy's schedulers), None for any other one."""
    status = getattr(scheduler_of(crawler), "status", None)
    return status() if callable(status) else None
