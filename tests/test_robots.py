"""RobotsMiddleware: every request that waited on a robots.txt is checked against it.

``robots.test`` (the ``politeness`` test web) has 30 allowed and 30 disallowed pages; all 60 are
seeds, and with 64 connections per IP and no delay they reach the robots middleware together
while the host's robots.txt is being fetched. Scrapy 2.19's own middleware lets the waiters
after the first through unchecked (they await one shared Deferred and get ``None``); the
control run with it shows the test catches that.
"""

from __future__ import annotations

import json

import pytest

from settings.base import DOWNLOADER_MIDDLEWARES
from tests.support.crawl import run_crawl, seeds_args
from testweb.harness import start_web

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

STOCK = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
OURS = "larbinscrapy.middlewares.robots.RobotsMiddleware"


def test_every_request_waiting_on_robots_txt_is_checked(tmp_path):
    with start_web(tmp_path / "web", web="politeness") as web:
        urls = sorted(u for u in web.web.pages if "//robots.test:" in u)
        disallowed = {u for u in urls if not web.web.can_fetch(u)}
        assert len(urls) == 60 and len(disallowed) == 30
        args = ("-a", "depth=0", *seeds_args(urls))
        settings = {
            "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 64,
            "LARBIN_IP_DELAY": 0,
            "LARBIN_IP_CONNECTIONS": 64,
        }
        ours = run_crawl(web, tmp_path / "ours", *args, settings=settings)
        stock_mw = {**DOWNLOADER_MIDDLEWARES, OURS: None, STOCK: 100}
        stock = run_crawl(
            web,
            tmp_path / "stock",
            *args,
            settings={**settings, "DOWNLOADER_MIDDLEWARES": json.dumps(stock_mw)},
        )
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert ours.fetched(web.port) == set(urls) - disallowed
    assert ours.stats["robotstxt/forbidden"] == 30
    assert ours.stats["robotstxt/request_count"] == 1
    assert sum(e["path"] == "/robots.txt" for e in ours.requests) == 1
    assert stock.returncode == 0, stock.stderr[-3000:]
    leaked = stock.fetched(web.port) & disallowed
    print(f"disallowed pages fetched: ours 0, Scrapy's RobotsTxtMiddleware {len(leaked)}")
    assert leaked
