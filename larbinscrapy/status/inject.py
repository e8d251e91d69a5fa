"""``POST /api/urls`` (larbin's inputPort): URLs added to a running crawl get the seeds'
treatment."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from twisted.internet.error import DNSLookupError

from larbinscrapy import meta as M
from larbinscrapy.frontier import frontier_of
from larbinscrapy.gate.admission import spider_errback, spider_url_filter
from larbinscrapy.parse.urls import check_url
from larbinscrapy.politeness.dns import SsrfGuard, dns_cache

if TYPE_CHECKING:
    from scrapy.core.engine import ExecutionEngine
    from scrapy.crawler import Crawler


class BadPayload(ValueError):
    """The request body is not ``{"urls": [...], "priority": bool, "depth": int}``."""


@dataclass
class UrlBatch:
    """A valid request body: the URLs to queue, in which tier, at which depth."""

    urls: list[str]
    priority: bool = False
    depth: int | None = None


@dataclass
class Outcome:
    """What became of each URL of a batch."""

    queued: list[str] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    shared: bool = False  # the shared (Redis) frontier: its seen test runs there, at admission

    def as_json(self) -> dict[str, Any]:
        return {
            "queued": len(self.queued),
            "seen": len(self.seen),
            "refused": len(self.refused),
            "refusals": self.refused,
            "queued_urls": self.queued,
            "seen_urls": self.seen,
            "seen_test": "shared frontier, at admission" if self.shared else "done",
        }


def parse_batch(body: bytes, max_urls: int) -> UrlBatch:
    """The JSON body of ``POST /api/urls``; BadPayload with a one-line reason otherwise."""
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadPayload(f"body is not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("urls"), list):
        raise BadPayload('expected {"urls": ["http://...", ...], "priority": false, "depth": N}')
    urls = data["urls"]
    if len(urls) > max_urls:
        raise BadPayload(f"{len(urls)} URLs in one request, at most {max_urls}")
    if not all(isinstance(u, str) for u in urls):
        raise BadPayload("every URL must be a string")
    priority = data.get("priority", False)
    if not isinstance(priority, bool):
        raise BadPayload(f"priority must be true or false, got {priority!r}")
    depth = data.get("depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise BadPayload(f"depth must be a non-negative integer, got {depth!r}")
    return UrlBatch([u.strip() for u in urls], priority, depth)


class UrlInjector:
    """Runs a ``UrlBatch`` through validation, DNS + SSRF guard and the engine's ``crawl``.

    ``engine.crawl`` is Scrapy's public way in (the ``request_scheduled`` signal, the
    scheduler, a wake-up); it returns nothing, so a URL the seen-set had is told apart by
    the ``request_dropped`` signal the engine sends for it. A URL that a ``request_scheduled``
    receiver refuses (Scrapy's offsite filter) counts as queued: the engine says nothing of it.
    """

    def __init__(self, crawler: Crawler, guard: SsrfGuard) -> None:
        self.crawler = crawler
        self.guard = guard
        self._dropped: Request | None = None  # the last request the engine dropped
        crawler.signals.connect(self._request_dropped, signal=signals.request_dropped)

    def _request_dropped(self, request: Request, spider: Any = None) -> None:
        self._dropped = request

    def _engine(self) -> ExecutionEngine | None:
        """The engine of a running crawl, None before it opens or once it closes."""
        try:
            engine = self.crawler.engine
        except RuntimeError:
            return None
        return engine if engine is not None and engine.spider is not None else None

    async def add(self, batch: UrlBatch) -> Outcome:
        out = Outcome()
        if self._engine() is None:
            for url in batch.urls:
                out.refused.append({"url": url, "reason": "the crawl is not running"})
            return out
        # The Redis scheduler buffers and tests the shared seen bits inside its admission
        # script: "queued" there means sent to the shared frontier, which drops a seen URL.
        frontier = frontier_of(self.crawler)
        out.shared = frontier is not None and "shared" in frontier.status()
        done: set[str] = set()
        for url in batch.urls:
            if url in done:
                out.seen.append(url)
                continue
            done.add(url)
            reason = check_url(url) or await self._guard(url)
            engine = self._engine()  # the crawl may have ended while DNS answered
            if reason or engine is None:
                out.refused.append({"url": url, "reason": reason or "the crawl is over"})
                continue
            request = self._request(url, batch)
            engine.crawl(request)
            (out.seen if self._dropped is request else out.queued).append(url)
        self._dropped = None
        stats = self.crawler.stats
        for event, urls in (("queued", out.queued), ("seen", out.seen), ("refused", out.refused)):
            if urls:
                stats.inc_value(f"larbin/status/urls/{event}", len(urls))
        return out

    async def _guard(self, url: str) -> str | None:
        host = urlsplit(url).hostname or ""
        try:
            ip = await dns_cache(self.crawler).resolve(host)
        except DNSLookupError:
            return f"dns: {host} does not resolve"
        if self.guard.refuses(ip):
            return f"ssrf: {host} resolves to {ip}, not a public address"
        return None

    def _request(self, url: str, batch: UrlBatch) -> Request:
        spider = self.crawler.spider
        site_depth = 0
        url_filter = spider_url_filter(spider)
        max_depth = None if url_filter is None else url_filter.max_depth
        if batch.depth is not None and max_depth is not None:
            site_depth = max(0, max_depth - batch.depth)
        meta: dict[str, Any] = {"depth": 0, M.SITE_DEPTH: site_depth}
        if batch.priority:
            meta[M.PRIORITY] = True
        return Request(url, errback=spider_errback(spider), meta=meta)
