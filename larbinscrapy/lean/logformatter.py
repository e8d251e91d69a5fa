"""``QuietLogFormatter``: Scrapy's log formatter without per-page records nobody sees.

Replaces: ``LogFormatter`` (``LOG_FORMATTER``). For every page and item, Scrapy's ``crawled``
and ``scraped`` build a DEBUG record (a dict, the referer header read back, a ``LogRecord``)
that the handler then drops below ``LOG_LEVEL``. These return ``None`` (Scrapy then logs
nothing) unless DEBUG is logged; every other message is Scrapy's own.
Private names: none (public ``LogFormatter`` API; ``None`` is a documented return value).
Retire when: Scrapy checks the level before building the record.
Settings: ``LOG_LEVEL``, ``LOG_ENABLED``.
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

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = ()

logger = logging.getLogger(__name__)


def debug_enabled(log_enabled: bool, log_level: str | int) -> bool:
    """Whether Scrapy's handler keeps DEBUG records: logging on and ``LOG_LEVEL`` <= DEBUG."""
    if not log_enabled:
        return False
    level = (
        log_level
        if isinstance(log_level, int)
        else logging.getLevelName(str(log_level).strip().upper())
    )
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
