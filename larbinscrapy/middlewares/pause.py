"""``PauseGate``: the crawl's pause and stop switch, and the downloader middleware that holds
every request while the crawl is paused.

The status page asks it (``pause_crawl``, ``resume_crawl``, ``stop_crawl``), and so does a
command for every worker of a distributed crawl (``signals.crawl_command``, sent by the
frontier's ``AllWorkers``): it pauses the engine and holds what is already in the downloader.
A stop (Ctrl-C, ``/api/stop``) ends the held requests unsent (``larbinscrapy.stopping``): a
stop while paused neither waits for a resume nor sends what the pause held. Its log line says
where the queue stays: Redis, ``JOBDIR``, or nowhere. Stats: ``larbin/status/paused``,
``resumed``, ``stopped``, ``held``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer

from larbinscrapy.frontier import frontier_of
from larbinscrapy.lean.private import wake_engine
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.signals import crawl_command
from larbinscrapy.stopping import POLL, drop_held, stopping

if TYPE_CHECKING:
    from collections.abc import Coroutine
    from typing import Any

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.base import DelayedCall

logger = logging.getLogger(__name__)


class PauseGate:
    """Holds ``process_request`` while ``paused``; ``resume()`` lets the held requests go."""

    def __init__(self, crawler: Crawler, *, jobdir: bool = False) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.jobdir = jobdir  # the local frontier is kept in JOBDIR
        self.paused = False
        self.stopped = False  # a stop came: held requests end unsent
        self._waiters: list[defer.Deferred[None]] = []
        self._poll: DelayedCall | None = None
        crawler.signals.connect(self._command, signal=crawl_command)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PauseGate:
        return cls(crawler, jobdir=bool(crawler.settings.get("JOBDIR")))

    # -- the crawl's switch (the status page; a command for every worker) -------------------
    def pause_crawl(self, source: str) -> None:
        """No new request is sent (the engine pauses, the gate holds) until ``resume_crawl``."""
        if self.paused or self.stopped:
            return
        self.crawler.engine.pause()
        self.pause()
        self.stats.inc_value("larbin/status/paused")
        logger.info("Crawl paused from %s: no new request is sent", source)

    def resume_crawl(self, source: str) -> None:
        if not self.paused or self.stopped:
            return
        engine = self.crawler.engine
        engine.unpause()
        self.resume()
        self.stats.inc_value("larbin/status/resumed")
        logger.info("Crawl resumed from %s", source)
        wake_engine(engine)  # the frontier may have had work for a while: ask for it now

    def stop_crawl(self, source: str) -> None:
        """Ctrl-C's graceful stop: what is in flight finishes, the queue is kept (if it can
        be: the line says where)."""
        if self.stopped:
            return
        self.stats.inc_value("larbin/status/stopped")
        logger.info("Stop requested from %s: closing %s", source, self.where_kept())
        self.stop()  # requests held here end unsent, or closing would wait for ever
        deferred_from_coro(self.crawler.stop_async())

    def where_kept(self) -> str:
        """What the stop line says is kept: this worker's Redis queue, JOBDIR, or nothing."""
        frontier = frontier_of(self.crawler)
        shared = frontier.all_workers if frontier is not None else None
        if shared is not None:
            return f"this worker; {shared.kept}"
        if self.jobdir:
            return "the crawl (resumable with the same JOBDIR)"
        return "the crawl (no JOBDIR: its queue is not kept, a new run starts over)"

    def _command(self, command: str, source: str) -> None:
        """A command for every worker (``signals.crawl_command``)."""
        switch = {"pause": self.pause_crawl, "resume": self.resume_crawl, "stop": self.stop_crawl}
        if command in switch:
            switch[command](source)

    # -- the gate -----------------------------------------------------------------------------

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
