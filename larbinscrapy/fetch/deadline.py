"""larbin's page timeout: a page may take ``DOWNLOAD_TIMEOUT`` plus 1 s per
``LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND`` bytes received, enforced around
``LARBIN_FETCH_HANDLER``."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy import signals
from scrapy.exceptions import DownloadTimeoutError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet import defer

from larbinscrapy.lean.addon import SCRAPY_HTTP_HANDLER
from larbinscrapy.lean.perscheme import one_per_crawler
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred

_SLACK = 0.001  # seconds: a timer this close to the deadline has reached it


@dataclass(frozen=True, slots=True)
class EarnedTime:
    """larbin's page timeout: ``base`` seconds plus one per ``bytes_per_second`` bytes received."""

    bytes_per_second: float
    stats: Any

    def left(self, start: float, base: float, received: int, now: float) -> float | None:
        """Seconds the page still has from ``now``, or None when its time is up."""
        left = start + base + received / self.bytes_per_second - now
        return left if left > _SLACK else None

    def expired(self, url: str, base: float, received: int) -> DownloadTimeoutError:
        """The error of a page past its deadline (counted in ``larbin/timeout/pages``)."""
        self.stats.inc_value("larbin/timeout/pages")
        return DownloadTimeoutError(
            f"Getting {url} took longer than {base + received / self.bytes_per_second:.1f} s "
            f"(larbin page timeout: {base:g} s + {received} bytes "
            f"at {self.bytes_per_second:g} B/s)"
        )


@runtime_checkable
class TimesPagesItself(Protocol):
    """An inner handler that applies the rule to its own pages (the lean one, plain http)."""

    def adopt_page_deadline(
        self, rule: EarnedTime
    ) -> Callable[[Request], Awaitable[Response] | None]:
        """Apply ``rule``; the download of a request timed inside, or None for the others."""


@dataclass(slots=True)
class _PageClock:
    """One download in flight: when it started, its base timeout, the bytes received so far."""

    start: float
    base: float
    received: int = 0
    expired: bool = False
    timer: Any = None


class PageDeadlineHandler:
    """larbin's page timeout as a download handler wrapping another (``DOWNLOAD_HANDLERS``).

    A page may take ``download_timeout`` (``DOWNLOAD_TIMEOUT``) seconds plus one second per
    ``LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND`` bytes received. Scrapy fixes a download's timeout when
    it starts, so the inner handler (``LARBIN_FETCH_HANDLER``: the lean one or Scrapy's HTTP/1.1)
    gets the longest deadline any page can reach (``DOWNLOAD_MAXSIZE`` bytes at that rate) as a
    backstop, and one timer per download enforces the real one: when it falls due it compares
    the deadline with the bytes counted from ``bytes_received`` and re-arms itself at the new
    deadline, or cancels the download (the connection is closed) and raises
    ``DownloadTimeoutError``. The cost is one timer per page and one addition per chunk; a page
    that arrives before its base timeout never wakes the timer.
    """

    lazy = False

    def __init__(
        self, crawler: Crawler, inner: Any, base: float, bytes_per_second: float, maxsize: int
    ) -> None:
        if bytes_per_second <= 0:
            raise ValueError("LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND must be positive")
        self.inner = inner
        self.base = base
        self.maxsize = maxsize
        self.rule = EarnedTime(bytes_per_second, crawler.stats)
        # the inner handler's own download of a request it times with the rule, else None
        self._timed_inside: Callable[[Request], Awaitable[Response] | None] | None = (
            inner.adopt_page_deadline(self.rule) if isinstance(inner, TimesPagesItself) else None
        )
        self._pages: dict[Request, _PageClock] = {}
        self._reactor = installed_reactor()
        self._signals = crawler.signals
        self._counting = False  # bytes_received connected: on the first download, see below
        self._closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageDeadlineHandler:
        """One wrapper for http and https: its inner handler owns the crawl's connections."""
        return one_per_crawler(cls, crawler, lambda: cls._build(crawler))

    @classmethod
    def _build(cls, crawler: Crawler) -> PageDeadlineHandler:
        s = crawler.settings
        # empty when no LeanEngineAddon ran to choose: Scrapy's handler, as with the switch off
        inner_cls = load_object(s["LARBIN_FETCH_HANDLER"] or SCRAPY_HTTP_HANDLER)
        return cls(
            crawler,
            build_from_crawler(inner_cls, crawler),
            s.getfloat("DOWNLOAD_TIMEOUT"),
            s.getfloat("LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND"),
            s.getint("DOWNLOAD_MAXSIZE") or 1024**3,
        )

    async def download_request(self, request: Request) -> Response:
        if self._timed_inside is not None:
            inside = self._timed_inside(request)
            if inside is not None:
                return await inside
        if not self._counting:
            # connected on the first download timed here, not by the inner handler: every
            # receiver costs a call per chunk of every page
            self._counting = True
            self._signals.connect(self._bytes_received, signal=signals.bytes_received)
        meta = request.meta
        base = float(meta.get("download_timeout") or self.base)
        maxsize = max(int(meta.get("download_maxsize") or 0), self.maxsize)
        meta["download_timeout"] = base + maxsize / self.rule.bytes_per_second + 1
        page = self._pages[request] = _PageClock(self._reactor.seconds(), base)
        d = deferred_from_coro(self.inner.download_request(request))
        page.timer = self._reactor.callLater(base, self._check, request, page, d)
        try:
            return await maybe_deferred_to_future(d)
        except (defer.CancelledError, asyncio.CancelledError):
            # asyncio's when the inner handler is a coroutine (a cancelled Task), else Twisted's
            if not page.expired:
                raise
            raise self.rule.expired(request.url, base, page.received) from None
        finally:
            if page.timer.active():
                page.timer.cancel()
            self._pages.pop(request, None)
            meta["download_timeout"] = base

    def _check(self, request: Request, page: _PageClock, d: Deferred[Response]) -> None:
        if d.called or self._pages.get(request) is not page:
            return
        left = self.rule.left(page.start, page.base, page.received, self._reactor.seconds())
        if left is not None:  # bytes came in since the timer was set: the page earned more time
            page.timer = self._reactor.callLater(left, self._check, request, page, d)
            return
        page.expired = True
        d.cancel()

    def _bytes_received(self, data: bytes, request: Request) -> None:
        page = self._pages.get(request)
        if page is not None:
            page.received += len(data)

    async def close(self) -> None:
        """Close the inner handler once (Scrapy closes this wrapper for each scheme)."""
        if self._closed:
            return
        self._closed = True
        closing = self.inner.close()
        if inspect.isawaitable(closing):
            await closing
