"""``PauseGate``: the downloader middleware that holds every request while the crawl is paused."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector


class PauseGate:
    """Holds ``process_request`` while ``paused``; ``resume()`` lets the held requests go."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.paused = False
        self._waiters: list[defer.Deferred[None]] = []

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PauseGate:
        return cls(crawler.stats)

    @property
    def held(self) -> int:
        return len(self._waiters)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        waiters, self._waiters = self._waiters, []
        for d in waiters:  # one Deferred each: a shared one would hand None to later awaiters
            d.callback(None)

    def process_request(self, request: Request, spider: Spider | None = None
                        ) -> Coroutine[Any, Any, None] | None:
        """None at once unless paused: a coroutine a request costs only while it waits."""
        return self._held() if self.paused else None

    async def _held(self) -> None:
        while self.paused:
            d: defer.Deferred[None] = defer.Deferred()
            self._waiters.append(d)
            self.stats.inc_value("larbin/status/held")
            await maybe_deferred_to_future(d)
