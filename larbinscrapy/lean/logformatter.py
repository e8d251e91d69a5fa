"""Scrapy's log formatter without the two DEBUG lines per page that nobody reads.

For every page Scrapy's engine asks the log formatter for "Crawled (200) <GET ...> (referer:
...)" and the scraper for "Scraped from <200 ...>", and logs both at DEBUG. Scrapy leaves the
root logger at NOTSET, so the records are built (a dict, the referer header read back, two
``LogRecord``) and only then dropped by the handler below ``LOG_LEVEL``. ``QuietLogFormatter``
returns ``None`` for both (Scrapy then logs nothing) unless ``LOG_LEVEL`` is ``DEBUG``; every
other message (dropped items, download and spider errors) is Scrapy's own.

Settings: ``LOG_FORMATTER`` (this class), ``LOG_LEVEL``, ``LOG_ENABLED``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter, LogFormatterResult

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)


def debug_enabled(log_enabled: bool, log_level: str | int) -> bool:
    """Whether Scrapy's handler keeps DEBUG records: logging on and ``LOG_LEVEL`` <= DEBUG."""
    if not log_enabled:
        return False
    level = log_level if isinstance(log_level, int) else logging.getLevelName(
        str(log_level).strip().upper())
    if not isinstance(level, int):
        raise ValueError(f"LOG_LEVEL: unknown level {log_level!r}")
    return level <= logging.DEBUG


class QuietLogFormatter(LogFormatter):
    """Scrapy's ``LogFormatter``; "Crawled" and "Scraped" only when DEBUG is logged."""

    def __init__(self, debug: bool) -> None:
        super().__init__()
        self.debug = debug

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> QuietLogFormatter:
        s = crawler.settings
        return cls(debug_enabled(s.getbool("LOG_ENABLED"), s.get("LOG_LEVEL")))

    def crawled(  # type: ignore[override]  # None: Scrapy logs nothing
        self, request: Request, response: Response, spider: Spider
    ) -> LogFormatterResult | None:
        return super().crawled(request, response, spider) if self.debug else None

    def scraped(  # type: ignore[override]  # None: Scrapy logs nothing
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        return super().scraped(item, response, spider) if self.debug else None
