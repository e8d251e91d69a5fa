"""Scrapy middlewares kept for what they do, without the layer they cost on every page.

Replaces (``SPIDER_MIDDLEWARES``, ``DOWNLOADER_MIDDLEWARES``): ``StartSpiderMiddleware`` by
``StartOnlyMiddleware`` (``meta["is_start_request"]`` without an output layer);
``RefererMiddleware`` by ``GateRefererMiddleware`` (the same policies, applied by
``LinkGateMiddleware`` through ``get_processed_request``); ``DownloaderStats`` by
``DownloaderStatsMiddleware`` (the same ``downloader/*`` stats, sizes added up without
serialising the request). Details: docs/modules.md, lean/.
Private names: none imported; the sources of the methods and functions mirrored are checked
(``process_spider_output``, ``get_processed_request``, ``DownloaderStats``' three methods,
``get_header_size``, ``get_status_size``, ``request_httprepr``).
Retire when: Scrapy skips a spider middleware's layer when it has nothing to do per output, and
counts request and response sizes without serialising them.
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
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    ("scrapy.spidermiddlewares.start", "StartSpiderMiddleware.process_start", "71105f101835"),
    (
        "scrapy.spidermiddlewares.start",
        "StartSpiderMiddleware.process_spider_output",
        "77a6848a8d52",
    ),
    ("scrapy.spidermiddlewares.referer", "RefererMiddleware.process_spider_output", "77a6848a8d52"),
    ("scrapy.spidermiddlewares.referer", "RefererMiddleware.get_processed_request", "ba5d5afcbeaf"),
    ("scrapy.downloadermiddlewares.stats", "DownloaderStats.process_request", "88494cbb091a"),
    ("scrapy.downloadermiddlewares.stats", "DownloaderStats.process_response", "2fc34ad0b696"),
    ("scrapy.downloadermiddlewares.stats", "DownloaderStats.process_exception", "e86981268267"),
    ("scrapy.downloadermiddlewares.stats", "get_header_size", "648c17365b7a"),
    ("scrapy.downloadermiddlewares.stats", "get_status_size", "7e706e0713a1"),
    ("scrapy.utils.request", "request_httprepr", "967d60d25546"),
)

logger = logging.getLogger(__name__)


class StartOnlyMiddleware(StartSpiderMiddleware):
    """``StartSpiderMiddleware`` on start requests only: no layer over page outputs."""

    process_spider_output = None  # type: ignore[assignment]
    process_spider_output_async = None  # type: ignore[assignment]


class GateRefererMiddleware(RefererMiddleware):
    """``RefererMiddleware`` applied by the link gate: no layer over page outputs."""

    process_spider_output = None  # type: ignore[assignment]
    process_spider_output_async = None  # type: ignore[assignment]


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

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        inc = self._inc
        inc("downloader/exception_count")
        inc(f"downloader/exception_type_count/{global_object_name(exception.__class__)}")
