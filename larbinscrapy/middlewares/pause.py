"""``PauseGate``: the downloader middleware that holds every request while the crawl is paused.

A stop (Ctrl-C, ``/api/stop``) ends the held requests unsent (``larbinscrapy.stopping``): a
stop while paused neither waits for a resume nor sends what the pause held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer

from larbinscrapy.reactor import installed_reactor
from larbinscrapy.stopping import POLL, drop_held, stopping

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.base import DelayedCall


class PauseGate:
    """Holds ``process_request`` while ``paused``; ``resume()`` lets the held requests go."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.paused = False
        self.stopped = False  # a stop came: held requests end unsent
        self._waiters: list[defer.Deferred[None]] = []
        self._poll: DelayedCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PauseGate:
        return cls(crawler)

    @property
    def held(self) -> int:
        return len(self._waiters)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._release()

    def stop(self) -> None:
        """The crawl stops: every held request ends unsent (the status page's stop)."""
        self.stopped = True
        self._release()

    def _release(self) -> None:
        waiters, self._waiters = self._waiters, []
        for d in waiters:  # one Deferred each: a shared one would hand None to later awaiters
            if not d.called:
                d.callback(None)

    def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> Coroutine[Any, Any, None] | None:
        """None at once unless paused: a coroutine a request costs only while it waits."""
        return self._held(request) if self.paused else None

    def _is_stopping(self) -> bool:
        return self.stopped or stopping(self.crawler)

    async def _held(self, request: Request) -> None:
        """Wait for ``resume``; a stop (seen within ``POLL`` s) ends the request unsent."""
        self.stats.inc_value("larbin/status/held")
        while self.paused and not self._is_stopping():
            d: defer.Deferred[None] = defer.Deferred()
            self._waiters.append(d)
            self._watch()
            await maybe_deferred_to_future(d)
        if self._is_stopping():
            drop_held(self.crawler, request)

    def _watch(self) -> None:
        """One timer for all held requests: Scrapy says nothing when a stop begins."""
        if self._poll is None:
            self._poll = installed_reactor().callLater(POLL, self._check)

    def _check(self) -> None:
        self._poll = None
        if self._is_stopping():
            self._release()
        elif self._waiters:
            self._watch()
