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

``CookiesMiddleware`` builds Scrapy's cookies middleware only when ``COOKIES_ENABLED`` is on:
importing it (for tldextract) costs ~45 ms of every crawl's start-up only to raise
``NotConfigured`` with our default ``COOKIES_ENABLED = False``.

Settings: ``SPIDER_MIDDLEWARES``, ``DOWNLOADER_MIDDLEWARES`` (these replace Scrapy's entries),
``COOKIES_ENABLED``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.spidermiddlewares.referer import RefererMiddleware
from scrapy.spidermiddlewares.start import StartSpiderMiddleware
from scrapy.utils.misc import build_from_crawler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

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


class CookiesMiddleware:
    """Scrapy's ``CookiesMiddleware``, imported only when ``COOKIES_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.getbool("COOKIES_ENABLED"):
            raise NotConfigured("COOKIES_ENABLED is off")
        from scrapy.downloadermiddlewares.cookies import CookiesMiddleware as Scrapys

        return build_from_crawler(Scrapys, crawler)
