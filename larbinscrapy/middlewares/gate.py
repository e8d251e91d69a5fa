"""larbin's ``check()``: the link gate between a parsed page and the frontier (filters, then the
seen test, and only then a ``Request``)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.spidermiddlewares.referer import RefererMiddleware

from larbinscrapy import meta as M
from larbinscrapy import signals as larbin_signals
from larbinscrapy.gate.seencache import SeenLinks
from larbinscrapy.gate.traps import TrapGuard
from larbinscrapy.gate.urlfilter import DEPTH, INVALID, UrlFilter
from larbinscrapy.items import PageItem
from larbinscrapy.lean.request import request_class
from larbinscrapy.parse.urls import host_of
from larbinscrapy.seen import seen_set_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class LinkGateMiddleware:
    """Filters, cheap seen test, then Requests: see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        depth_limit: int,
        url_filter: UrlFilter,
        url_cache: int,
        traps: TrapGuard | None = None,
        request_cls: type[Request] = Request,
    ) -> None:
        self.crawler = crawler
        self._request_cls = request_cls  # lean.request.request_class: SafeUrlRequest or Request
        self.url_cache = url_cache  # LARBIN_GATE_URL_CACHE (larbinscrapy.gate.seencache)
        self.stats = crawler.stats
        self.depth_limit = depth_limit
        self.url_filter = url_filter  # the spider's own filter replaces it at spider_opened
        self._trap = traps.reason if traps is not None and traps.enabled else None
        self._fingerprint_url = getattr(crawler.request_fingerprinter, "fingerprint_url", None)
        self._seen: SeenLinks | None = None
        self._count_seen: Any = None
        self._referer: Any = None  # GateRefererMiddleware: sets Referer on what we let through
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkGateMiddleware:
        s = crawler.settings
        traps = TrapGuard(
            s.getint("LARBIN_GATE_PAGES_PER_SITE_MAX"), s.getint("LARBIN_GATE_QUERIES_PER_PATH_MAX")
        )
        return cls(
            crawler,
            s.getint("DEPTH_LIMIT"),
            UrlFilter.from_settings(s),
            s.getint("LARBIN_GATE_URL_CACHE"),
            traps,
            request_class(s),
        )

    def _spider_opened(self, spider: Spider) -> None:
        self.url_filter = getattr(spider, "url_filter", None) or self.url_filter
        self._referer = _chainless_referer(self.crawler)
        seen = seen_set_of(self.crawler)
        if seen is not None and self._fingerprint_url is not None:
            self._seen = SeenLinks(seen.seen_fingerprint, self._fingerprint_url, self.url_cache)
            self._count_seen = seen.count_filtered
        else:
            logger.info(
                "Dupefilter or fingerprinter without a URL fast path: every link "
                "becomes a Request and is checked by the scheduler"
            )

    # -- spider middleware ----------------------------------------------------------------
    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        # Seeds are the user's explicit choice: as in larbin's input.cc, they only get the seen
        # test (in the scheduler), not the link filters (domains, extensions...).
        async for obj in start:
            if isinstance(obj, Request):
                obj.meta.setdefault(M.SITE_DEPTH, 0)
            yield obj

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterator[Any]:
        children = items = 0
        try:
            for obj in result:
                for out in self._process(response, obj):
                    if isinstance(out, Request):
                        children += 1
                    elif out is not None:  # the scraper sends it to the item pipelines
                        items += 1
                    yield out
        finally:
            self._done(response, children, items)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        children = items = 0
        try:
            async for obj in result:
                for out in self._process(response, obj):
                    if isinstance(out, Request):
                        children += 1
                    elif out is not None:  # the scraper sends it to the item pipelines
                        items += 1
                    yield out
        finally:
            self._done(response, children, items)

    def process_spider_exception(
        self, response: Response, exception: Exception, spider: Spider | None = None
    ) -> None:
        self._done(response, 0)

    def _done(self, response: Response, children: int, items: int = 0) -> None:
        """The page's output is over: ``children`` requests (marked ``larbin_parent``) and
        ``items`` items follow.

        Once per response (a failing callback reaches both the output's ``finally`` and
        ``process_spider_exception``): the scheduler acks the page's record when that many
        children reached ``enqueue_request`` and that many items are stored.
        """
        meta = response.meta
        if meta.get(M.OUTPUT_DONE):
            return
        meta[M.OUTPUT_DONE] = True
        self.crawler.signals.send_catch_log(
            larbin_signals.request_done, request=response.request, children=children,
            items=items,
        )

    # -- the gate ---------------------------------------------------------------------------
    def _process(self, response: Response, obj: Any) -> Iterator[Any]:
        if isinstance(obj, Request):
            if self._allowed(obj, response):
                yield obj
            return
        if isinstance(obj, PageItem) and obj.get("links"):
            yield from self.iter_admit(response, obj["links"])
        yield obj

    def _allowed(self, request: Request, response: Response | None) -> bool:
        meta = request.meta
        source = host_of(response.url) if response is not None else None
        host = host_of(request.url)
        site_depth = meta.get(M.SITE_DEPTH)
        if site_depth is None:
            parent = response.meta.get(M.SITE_DEPTH, 0) if response is not None else -1
            site_depth = parent + 1 if host == source else 0
            meta[M.SITE_DEPTH] = site_depth
        reason = self.url_filter.reason(request.url, host, site_depth, source)
        if reason is None and self.depth_limit and meta.get("depth", 0) > self.depth_limit:
            reason = DEPTH
        if reason is None:
            parent = response.meta.get(M.RID) if response is not None else None
            if parent is not None:
                meta[M.PARENT] = parent
            if self._referer is not None:
                self._referer.get_processed_request(request, response)
            return True
        self.stats.inc_value(f"larbin/filtered/{reason}")
        return False

    def admit(self, response: Response, links: Iterable[str]) -> list[Request]:
        """Requests for the links of ``response`` that pass the filters and were not seen."""
        return list(self.iter_admit(response, links))

    def iter_admit(self, response: Response, links: Iterable[str]) -> Iterator[Request]:
        """``admit`` one Request at a time: the scheduler takes each before the next is built.

        A page's links never all exist as Requests at once: a list of them all is what made
        link-heavy pages blow up the crawl's memory (benchmarks/RESULTS.md).
        """
        meta = response.meta
        depth = meta.get("depth", 0) + 1
        if self.depth_limit and depth > self.depth_limit:
            self.stats.inc_value(f"larbin/filtered/{DEPTH}", sum(1 for _ in links))
            return
        parent_depth = meta.get(M.SITE_DEPTH, 0)
        source = host_of(response.url)
        referer = response.url
        errback = getattr(self.crawler.spider, "on_error", None)
        parent = {M.PARENT: meta[M.RID]} if M.RID in meta else {}
        url_filter, trap = self.url_filter, self._trap
        reason_of = url_filter.reason
        # What a known link can still be filtered for depends only on whether it stays on
        # this page's host: two answers a page, not one call a link.
        same_host_reason = url_filter.context_reason(source, parent_depth + 1, source)
        other_host_reason = url_filter.context_reason("/", 0, source)  # "/": no host's name
        links_seen = self._seen  # raw-link cache, then fingerprint and seen-set
        known = links_seen.known if links_seen is not None and links_seen.size else None
        referer_mw, request_cls = self._referer, self._request_cls
        filtered: Counter[str] = Counter()
        n_seen = 0
        try:
            for url in links:
                if type(url) is not str:  # a user's item may carry anything: never a traceback
                    filtered[INVALID] += 1
                    continue
                if known is not None:
                    # A link string met recently passed the URL-only filters and is seen:
                    # only what depends on this page can still give another reason.
                    host = known(url)
                    if host is not None:
                        reason = same_host_reason if host == source else other_host_reason
                        if reason is not None:
                            filtered[reason] += 1
                        else:
                            n_seen += 1
                        continue
                host = host_of(url)
                site_depth = parent_depth + 1 if host == source else 0
                reason = reason_of(url, host, site_depth, source)
                if reason is not None:
                    filtered[reason] += 1
                    continue
                if links_seen is not None:
                    if links_seen.seen(url, host):
                        n_seen += 1
                        continue
                    admitted = {M.ADMITTED: url}
                else:
                    admitted = {}
                if trap is not None:
                    reason = trap(url)
                    if reason is not None:
                        filtered[reason] += 1
                        continue
                request_meta = {
                    **admitted,
                    **parent,
                    "depth": depth,
                    M.SITE_DEPTH: site_depth,
                    M.REFERER: referer,
                }
                try:
                    request = request_cls(url, errback=errback, meta=request_meta)
                except ValueError:  # is_valid_url() let it through: still this link only
                    filtered[INVALID] += 1
                    continue
                if referer_mw is not None:
                    referer_mw.get_processed_request(request, response)
                yield request
        finally:  # also when the consumer stops early: every link handled is counted
            for reason, n in filtered.items():
                self.stats.inc_value(f"larbin/filtered/{reason}", n)
            if n_seen and self._count_seen is not None:
                self._count_seen(n_seen)


def _chainless_referer(crawler: Crawler) -> RefererMiddleware | None:
    """The crawl's ``RefererMiddleware`` if it has no output layer (the gate then applies it)."""
    referer = crawler.get_spider_middleware(RefererMiddleware)
    if referer is not None and getattr(referer, "process_spider_output", None) is None:
        return referer
    return None
