"""Read-only looks into a running crawl for the status page and the log line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larbinscrapy.frontier import frontier_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def frontier_status(crawler: Crawler) -> dict[str, Any] | None:
    """The frontier's ``status()`` (larbinscrapy's schedulers), None for any other one."""
    frontier = frontier_of(crawler)
    return None if frontier is None else frontier.status()
