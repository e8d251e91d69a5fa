"""Plain Scrapy, as a Scrapy user would write a broad crawl: the benchmark's baseline.

A ``CrawlSpider`` with one ``Rule(LinkExtractor(), follow=True)``, run with the settings of
Scrapy's "Broad Crawls" page (https://docs.scrapy.org/en/latest/topics/broad-crawls.html) and
nothing from this project: it builds its ``Settings`` itself, so ``settings/base.py`` cannot leak
in. The only addition is ``BenchResolver``, which answers ``*.bench`` names from the
``BENCH_RESOLVE`` setting (like larbinscrapy's ``LARBIN_RESOLVE``), so both crawlers reach the
synthetic web without /etc/hosts.

    python benchmarks/plain_spider.py --seeds-file seeds.txt --resolve '{"h01.bench": "127.0.2.1"}'
        --out items.jsonl [--delay 0.5] [-s KEY=VALUE ...]

Exits 1 when the crawl did not finish normally.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from scrapy.crawler import CrawlerProcess
from scrapy.linkextractors import LinkExtractor
from scrapy.resolver import CachingThreadedResolver
from scrapy.settings import Settings
from scrapy.spiders import CrawlSpider, Rule
from twisted.internet import defer

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.base import ReactorBase
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

# https://docs.scrapy.org/en/latest/topics/broad-crawls.html, item by item.
BROAD_CRAWL_SETTINGS: dict[str, Any] = {
    "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",
    "CONCURRENT_REQUESTS": 100,
    "REACTOR_THREADPOOL_MAXSIZE": 20,
    "LOG_LEVEL": "INFO",
    "COOKIES_ENABLED": False,
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 15,
    "REDIRECT_ENABLED": False,
    "AJAXCRAWL_ENABLED": True,
    # "Crawl in BFO order"
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
}
BENCH_SETTINGS: dict[str, Any] = {
    "ROBOTSTXT_OBEY": True,
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,  # a code-running localhost endpoint: never in a benchmark
    "FEED_EXPORT_ENCODING": "utf-8",
}


class BenchResolver(CachingThreadedResolver):
    """Scrapy's default resolver, answering the names in ``BENCH_RESOLVE`` from that dict."""

    def __init__(
        self, reactor: ReactorBase, cache_size: int, timeout: float, overrides: dict[str, str]
    ) -> None:
        super().__init__(reactor, cache_size, timeout)
        self.overrides = {name.lower(): ip for name, ip in overrides.items()}

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: ReactorBase) -> Self:
        settings = crawler.settings
        cache_size = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        return cls(
            reactor, cache_size, settings.getfloat("DNS_TIMEOUT"), settings.getdict("BENCH_RESOLVE")
        )

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        ip = self.overrides.get(name.lower())
        if ip is not None:
            return defer.succeed(ip)
        return super().getHostByName(name, timeout)


class PlainSpider(CrawlSpider):
    """Follow every link, yield url and title per page."""

    name = "plain"
    rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

    def parse_item(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {"url": response.url, "title": response.css("title::text").get()}


def build_settings(
    resolve: dict[str, str], out: str, delay: float | None, overrides: list[str]
) -> Settings:
    """Scrapy's defaults + the broad-crawl page + the benchmark's needs + ``-s`` overrides."""
    settings = Settings()
    settings.setdict(BROAD_CRAWL_SETTINGS, priority="project")
    settings.setdict(BENCH_SETTINGS, priority="project")
    settings.set("TWISTED_DNS_RESOLVER", BenchResolver, priority="project")
    settings.set("BENCH_RESOLVE", resolve, priority="project")
    settings.set("FEEDS", {out: {"format": "jsonlines", "overwrite": True}}, priority="project")
    if delay is not None:
        settings.set("DOWNLOAD_DELAY", delay, priority="cmdline")
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"-s expects KEY=VALUE, got {item!r}")
        settings.set(key, value, priority="cmdline")
    return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Plain-Scrapy broad crawl (benchmark baseline)")
    parser.add_argument("--seeds-file", required=True, help="one start URL per line")
    parser.add_argument("--resolve", default="{}", help='JSON {"host": "ip"}')
    parser.add_argument("--out", required=True, help="items file (JSON lines)")
    parser.add_argument("--delay", type=float, help="DOWNLOAD_DELAY, seconds")
    parser.add_argument("-s", dest="set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    os.environ.pop("SCRAPY_SETTINGS_MODULE", None)
    with open(args.seeds_file, encoding="utf-8") as f:
        seeds = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    settings = build_settings(json.loads(args.resolve), args.out, args.delay, args.set)
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(PlainSpider)
    process.crawl(crawler, start_urls=seeds)
    process.start()
    reason = crawler.stats.get_value("finish_reason") if crawler.stats else None
    # closespider_*: a limit the caller set (the runner's start-up measurement) was reached
    return 0 if reason == "finished" or str(reason).startswith("closespider_") else 1


if __name__ == "__main__":
    sys.exit(main())
