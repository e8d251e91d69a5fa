"""Seeds read from Redis, and when a worker with nothing left to do may close.

Seeds are pushed to ``REDIS_START_URLS_KEY`` (scrapy-redis's list: ``lpush larbin:start_urls
URL``), as a plain URL or scrapy-redis's JSON form ``{"url": ..., "meta": {...}}``. They follow
the rule of ``-a seeds=`` seeds: a seed is the user's explicit choice, so it is checked as a URL
(``seeds.check_url``: http(s), a host, no whitespace; a bad one is logged and counted in
``larbin/seeds/invalid``) and then only gets the seen test in the scheduler, never the link
filters (domains, extensions, depth...), as in larbin's input.cc.

``IdleRule`` is the worker's ending: it closes once the shared frontier has had no queued and no
leased record and no seed waiting for ``LARBIN_REDIS_IDLE_BEFORE_CLOSE`` seconds.

Stats: ``larbin/seeds/redis`` (seeds handed to the engine), ``larbin/seeds/invalid``.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request

from larbinscrapy import meta as M
from larbinscrapy.parse.urls import check_url

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from larbinscrapy.politeness.ipsites import Stats

logger = logging.getLogger(__name__)


class RedisSeeds:
    """Turns the raw entries of the start-URLs list into seed requests for the engine."""

    def __init__(self, key: str, batch: int, stats: Stats) -> None:
        self.key = key  # REDIS_START_URLS_KEY, formatted for the spider
        self.batch = batch  # REDIS_START_URLS_BATCH_SIZE: entries taken per tick
        self.stats = stats

    def crawl(
        self,
        raw: Iterable[bytes],
        crawl: Callable[[Request], Any],
        errback: Callable[..., Any] | None,
    ) -> int:
        """Hand the valid seeds among ``raw`` to ``crawl`` (``engine.crawl``); how many."""
        n = 0
        for data in raw:
            request = self.request(data.decode("utf-8", "replace"), errback)
            if request is not None:
                self.stats.inc_value("larbin/seeds/redis")
                crawl(request)
                n += 1
        return n

    def request(self, data: str, errback: Callable[..., Any] | None = None) -> Request | None:
        """The seed request of one entry, or None (logged and counted) if it is not a URL."""
        meta: dict[str, Any] = {}
        url = data.strip()
        problem = None
        if url.startswith("{"):
            try:
                obj = json.loads(url)
                url, meta = obj["url"], dict(obj.get("meta") or {})
            except (ValueError, KeyError, TypeError, AttributeError):
                problem = "neither a URL nor scrapy-redis's JSON form"
        if problem is None:
            problem = check_url(url) if isinstance(url, str) else "the url is not a string"
        if problem is None:
            try:
                return Request(url, errback=errback, meta={**M.seed_meta(), **meta})
            except (ValueError, TypeError) as exc:
                problem = str(exc)
        logger.warning("Skipping bad seed from %s: %s: %r", self.key, problem, data[:200])
        self.stats.inc_value("larbin/seeds/invalid")
        return None


class IdleRule:
    """Whether a worker whose engine is idle may close, given the shared frontier's status."""

    def __init__(self, idle_before_close: float) -> None:
        self.idle_before_close = idle_before_close
        self._done_since: float | None = None

    def may_close(self, status: dict[str, int], busy: bool, now: float) -> bool | None:
        """True: close now; False: work is left; None: empty, but not for long enough yet.

        ``busy``: this worker still has something in hand (a host being resolved).
        """
        if status["queued"] or status["leased"] or status["seeds"] or busy:
            self._done_since = None
            return False
        if self._done_since is None:
            self._done_since = now
        if now - self._done_since < self.idle_before_close:
            return None
        return True
