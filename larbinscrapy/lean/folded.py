"""Scrapy middlewares kept for what they do, without the layer they cost on every page.

Each spider middleware with a ``process_spider_output`` adds two async-generator layers over
every output of every page (the method and Scrapy's ``_evaluate_iterable``). Two of Scrapy's
defaults do nothing in that layer that the link gate cannot do itself:

* ``StartOnlyMiddleware``: Scrapy's ``StartSpiderMiddleware`` (``meta["is_start_request"]``
  on start requests, in ``process_start``); its output layer is a no-op for responses.
* ``GateRefererMiddleware``: Scrapy's ``RefererMiddleware`` (``REFERER_ENABLED``,
  ``REFERRER_POLICY``, ``REFERRER_POLICIES``, ``meta["referrer_policy"]``, the response's
  ``Referrer-Policy`` header) with its output layer removed: ``LinkGateMiddleware`` calls its
  ``get_processed_request`` for every request it lets through. ``RedirectMiddleware`` finds it
  as before (``crawler.get_spider_middleware(RefererMiddleware)``) for redirects.

``DownloaderStatsMiddleware`` is Scrapy's ``DownloaderStats`` (``DOWNLOADER_STATS``; the same
``downloader/*`` stats with the same values) at a fifth of its cost per page: it adds up the
lengths of ``request_httprepr`` instead of building the bytes, reads the headers' storage
directly, and binds ``stats.inc_value`` once (every attribute read on Scrapy's stats collector
goes through a deprecation wrapper).

Settings: ``SPIDER_MIDDLEWARES``, ``DOWNLOADER_MIDDLEWARES`` (these replace Scrapy's entries).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.stats import DownloaderStats, get_status_size
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.spidermiddlewares.start import StartSpiderMiddleware
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.python import global_object_name, to_bytes

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class StartOnlyMiddleware(StartSpiderMiddleware):
    """``StartSpiderMiddleware`` on start requests only: no layer over page outputs."""

    process_spider_output = None  # type: ignore[assignment]
    process_spider_output_async = None  # type: ignore[assignment]


class GateRefererMiddleware(RefererMiddleware):
    """``RefererMiddleware`` applied by the link gate: no layer over page outputs."""

    process_spider_output = None  # type: ignore[assignment]
    process_spider_output_async = None  # type: ignore[assignment]


def chainless_referer(crawler: Crawler) -> RefererMiddleware | None:
    """The crawl's ``RefererMiddleware`` if it has no output layer (its caller applies it)."""
    referer = crawler.get_spider_middleware(RefererMiddleware)
    if referer is not None and getattr(referer, "process_spider_output", None) is None:
        return referer
    return None


def header_size(headers: dict[bytes, list[bytes]]) -> int:
    """``get_header_size`` of Scrapy's stats middleware, on ``Headers``' own storage."""
    size = 0
    for key, values in dict.items(headers):
        for value in values:
            size += 2 + len(key) + len(value)
    return size + 2 * (len(headers) - 1)


def request_size(request: Request) -> int:
    """``len(request_httprepr(request))`` without building the bytes."""
    parsed = urlparse_cached(request)
    path = parsed.path or "/"
    if parsed.params:
        path += ";" + parsed.params
    if parsed.query:
        path += "?" + parsed.query
    size = len(to_bytes(request.method)) + len(to_bytes(path)) + 12  # " ", " HTTP/1.1\r\n"
    size += 8 + len(to_bytes(parsed.hostname or b""))  # "Host: ", "\r\n"
    if request.headers:  # Headers.to_string(): "Name: value" lines joined by "\r\n", then "\r\n"
        lines = 0
        for key, values in dict.items(request.headers):
            for value in values:
                size += 2 + len(key) + len(value)
                lines += 1
        size += 2 * (lines - 1) + 2
    return size + 2 + len(request.body)


class DownloaderStatsMiddleware(DownloaderStats):
    """Scrapy's ``DownloaderStats``, same stats, cheaper per request (module docstring)."""

    def __init__(self, stats: StatsCollector) -> None:
        super().__init__(stats)
        self._inc = stats.inc_value
        self._status_sizes: dict[int, int] = {}

    def process_request(self, request: Request, spider: Any = None) -> None:
        inc = self._inc
        inc("downloader/request_count")
        inc(f"downloader/request_method_count/{request.method}")
        inc("downloader/request_bytes", request_size(request))

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        inc, status = self._inc, response.status
        inc("downloader/response_count")
        inc(f"downloader/response_status_count/{status}")
        status_size = self._status_sizes.get(status)
        if status_size is None:
            status_size = self._status_sizes[status] = get_status_size(status)
        size = len(response.body) + header_size(response.headers) + status_size + 4
        inc("downloader/response_bytes", size)
        return response

    def process_exception(
        self, request: Request, exception: Exception, spider: Any = None
    ) -> None:
        inc = self._inc
        inc("downloader/exception_count")
        inc(f"downloader/exception_type_count/{global_object_name(exception.__class__)}")
