"""larbin's ``check()``: the link gate between a parsed page and the frontier (filters, then the
seen test, and only then a ``Request``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals

from larbinscrapy import meta as M
from larbinscrapy import signals as larbin_signals
from larbinscrapy.frontier import seen_set_of
from larbinscrapy.gate.admission import (
    Admission,
    AdmissionProvider,
    source_of,
    spider_errback,
    spider_url_filter,
)
from larbinscrapy.gate.seencache import SeenLinks
from larbinscrapy.gate.traps import TrapGuard
from larbinscrapy.gate.urlfilter import UrlFilter
from larbinscrapy.items import PageItem
from larbinscrapy.lean.folded import GateRefererMiddleware
from larbinscrapy.lean.request import request_class
from larbinscrapy.parse.urls import UrlFingerprinter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class LinkGateMiddleware(AdmissionProvider):
    """The Scrapy adapter of the gate's core (``gate.admission``): see the module docstring."""

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
        self.url_cache = url_cache  # LARBIN_GATE_URL_CACHE (larbinscrapy.gate.seencache)
        self.admission = Admission(url_filter, depth_limit, crawler.stats, traps, request_cls)
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

    @property
    def url_filter(self) -> UrlFilter:
        """The filter in force: the spider's own once it opened, else the settings'."""
        return self.admission.url_filter

    def _spider_opened(self, spider: Spider) -> None:
        seen = seen_set_of(self.crawler)
        fingerprinter = self.crawler.request_fingerprinter
        links_seen = None
        if seen is not None and isinstance(fingerprinter, UrlFingerprinter):
            links_seen = SeenLinks.over(seen, fingerprinter.fingerprint_url, self.url_cache)
        else:
            logger.info(
                "Dupefilter or fingerprinter without a URL fast path: every link "
                "becomes a Request and is checked by the scheduler"
            )
        referer = _chainless_referer(self.crawler)
        self.admission.connect(
            url_filter=spider_url_filter(spider),
            links_seen=links_seen,
            count_seen=seen.count_filtered if links_seen is not None and seen else None,
            errback=spider_errback(spider),
            referer=None if referer is None else referer.get_processed_request,
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
            larbin_signals.request_done,
            request=response.request,
            children=children,
            items=items,
        )

    # -- the gate ---------------------------------------------------------------------------
    def _process(self, response: Response, obj: Any) -> Iterator[Any]:
        if isinstance(obj, Request):
            if self.admission.allow(obj, source_of(response) if response is not None else None):
                yield obj
            return
        if isinstance(obj, PageItem) and obj.get("links"):
            yield from self.iter_admit(response, obj["links"])
        yield obj

    def admit(self, response: Response, links: Iterable[str]) -> list[Request]:
        """Requests for the links of ``response`` that pass the filters and were not seen."""
        return list(self.iter_admit(response, links))

    def iter_admit(self, response: Response, links: Iterable[str]) -> Iterator[Request]:
        """``admit`` one Request at a time (``Admission.admit``)."""
        return self.admission.admit(source_of(response), links)


def _chainless_referer(crawler: Crawler) -> GateRefererMiddleware | None:
    """The crawl's ``RefererMiddleware`` if it has no output layer (the lean engine's folded
    one): the gate then applies its policy to each Request it lets through."""
    return crawler.get_spider_middleware(GateRefererMiddleware)
