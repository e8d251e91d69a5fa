"""The link gate and the spider built in-process from a crawler with every default setting."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from scrapy.utils.reactor import install_reactor, is_reactor_installed

if not is_reactor_installed():
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from larbinscrapy.middlewares.gate import LinkGateMiddleware
from larbinscrapy.seen.dupefilter import BitmapDupeFilter
from larbinscrapy.spiders.larbin import LarbinSpider
from settings import base

if TYPE_CHECKING:
    from larbinscrapy.items import PageItem

SETTINGS = {k: v for k, v in vars(base).items() if k.isupper()}
PAGE_URL = "http://h.test/dir/page.html"  # the page whose links the gate takes
PARSED_URL = "http://h.test/p.html"  # the page ``parse`` parses


def gate(**overrides: Any) -> tuple[LinkGateMiddleware, Any]:
    """The real ``LinkGateMiddleware`` over a real Bloom dupefilter, and its stats."""
    crawler = get_crawler(LarbinSpider, {**SETTINGS, **overrides})
    middleware = LinkGateMiddleware.from_crawler(crawler)
    df = BitmapDupeFilter(mode="bloom", capacity=100_000, stats=crawler.stats)
    crawler.engine = SimpleNamespace(  # what the gate reads: the seen-set, the spider middlewares
        scheduler=Scheduler(df),  # Scrapy's own, over larbin's seen-set (seen_set_of finds it)
        scraper=SimpleNamespace(spidermw=SimpleNamespace(middlewares=())),
    )
    middleware._spider_opened(None)
    return middleware, crawler.stats


def page_response(url: str = PAGE_URL) -> HtmlResponse:
    """An empty page at depth 1: the response the gate's links come from."""
    request = Request(url, meta={"depth": 1, "larbin_site_depth": 1})
    return HtmlResponse(url, body=b"", request=request)


def parse(
    body: bytes, headers: dict[str, Any] | None = None, **settings: Any
) -> tuple[PageItem, Any]:
    """The spider's one item for ``body`` served at ``PARSED_URL``, and the crawler's stats."""
    crawler = get_crawler(LarbinSpider, {**SETTINGS, **settings})
    spider = LarbinSpider.from_crawler(crawler, urls="http://h.test/")
    headers = {"Content-Type": "text/html; charset=utf-8", **(headers or {})}
    response = HtmlResponse(PARSED_URL, headers=headers, body=body, request=Request(PARSED_URL))
    (item,) = list(spider.parse(response))
    return item, crawler.stats
