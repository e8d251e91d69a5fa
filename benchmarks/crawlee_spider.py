"""crawlee-python, as its user would write a broad crawl: a peer in the benchmark.

A ``ParselCrawler`` (``crawlee[parsel]``) with in-memory storage, robots.txt respected, one
handler that stores ``{url, title}`` and enqueues the links of ``<a>``/``<area>`` (``href``) and
``<frame>``/``<iframe>`` (``src``) for every host (``strategy="all"``: the synthetic web links
only to its own hosts and its dead addresses). Concurrency is fixed at ``--concurrency``
(crawlee's autoscaled pool otherwise starts at 10 and ramps up on CPU readings). Retries are
crawlee's default (3), as a user would leave them.

It runs in its own virtualenv (``make bench-crawlee-venv``: ``benchmarks/.venv-crawlee``), so
nothing of this project or of Scrapy is importable here; the runner (``benchmarks/run.py``)
measures it from outside like the other peers.

    benchmarks/.venv-crawlee/bin/python benchmarks/crawlee_spider.py --seeds-file seeds.txt
        --out items.jsonl [--concurrency 100] [--max-pages N] [--insecure]

``--insecure``: accept any TLS certificate (the https scenario's is self-signed), through
crawlee's default HTTP client, ``ImpitHttpClient(verify=False)``.

Exits 1 when the crawl raised.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from typing import Any

logger = logging.getLogger(__name__)


async def crawl(
    seeds: list[str], out: str, concurrency: int, max_pages: int | None, insecure: bool = False
) -> None:
    """Crawl from ``seeds`` and write the dataset to ``out`` (JSON lines) at the end."""
    from crawlee import ConcurrencySettings
    from crawlee.crawlers import ParselCrawler, ParselCrawlingContext
    from crawlee.http_clients import ImpitHttpClient
    from crawlee.storage_clients import MemoryStorageClient

    extra: dict[str, Any] = {"http_client": ImpitHttpClient(verify=False)} if insecure else {}
    crawler = ParselCrawler(
        storage_client=MemoryStorageClient(),
        respect_robots_txt_file=True,
        concurrency_settings=ConcurrencySettings(
            min_concurrency=concurrency,
            desired_concurrency=concurrency,
            max_concurrency=concurrency,
        ),
        max_requests_per_crawl=max_pages,
        configure_logging=False,
        **extra,
    )

    @crawler.router.default_handler
    async def handler(context: ParselCrawlingContext) -> None:
        await context.push_data(
            {"url": context.request.url, "title": context.selector.css("title::text").get()}
        )
        await context.enqueue_links(selector="a, area", attribute="href", strategy="all")
        await context.enqueue_links(selector="frame, iframe", attribute="src", strategy="all")

    await crawler.run(seeds)
    data = await crawler.get_data()
    with open(out, "w", encoding="utf-8") as f:
        for item in data.items:
            f.write(json.dumps(item) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="crawlee-python broad crawl (benchmark peer)")
    parser.add_argument("--seeds-file", required=True, help="one start URL per line")
    parser.add_argument("--out", required=True, help="items file (JSON lines)")
    parser.add_argument("--concurrency", type=int, default=100, help="tasks in flight")
    parser.add_argument("--max-pages", type=int, help="stop after this many requests")
    parser.add_argument("--insecure", action="store_true", help="accept any TLS certificate")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    with open(args.seeds_file, encoding="utf-8") as f:
        seeds = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    kwargs: dict[str, Any] = {
        "concurrency": args.concurrency,
        "max_pages": args.max_pages,
        "insecure": args.insecure,
    }
    try:
        asyncio.run(crawl(seeds, args.out, **kwargs))
    except Exception:
        logger.exception("crawlee crawl failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
