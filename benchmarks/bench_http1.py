"""CPU per response of the download handler alone: Scrapy's HTTP/1.1 one against the lean one.

    python -m benchmarks.bench_http1 [--hosts 20] [--pages 100] [--inflight 64] [--reps 3]

In one process, on the running asyncio reactor: the synthetic web (``SynthWeb``, nginx on
loopback, ~17 KB pages) is fetched page by page through ``handler.download_request`` with
``--inflight`` requests at a time, keep-alive, 8 idle connections per host for both handlers;
CPU time of this process (user + sys) per response, medians of ``--reps`` alternating runs.
The URLs go round robin over the hosts, so the requests in flight to one host stay under the
idle connections kept for it and keep-alive is what is measured.
No engine, no middlewares: the difference is the handler's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import time
from typing import Any

from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy import Request  # noqa: E402
from scrapy.utils.defer import deferred_from_coro  # noqa: E402
from scrapy.utils.misc import build_from_crawler, load_object  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from testweb.synthweb import SynthWeb  # noqa: E402

HANDLERS = {
    "scrapy": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
    "lean": "larbinscrapy.lean.http1.LeanHttpDownloadHandler",
}


async def _fetch_all(handler: Any, urls: list[str], inflight: int) -> tuple[float, float, int]:
    """Fetch every URL, ``inflight`` at a time: (CPU seconds, wall seconds, bytes)."""
    queue = list(reversed(urls))
    received = 0

    async def worker() -> None:
        nonlocal received
        while queue:
            url = queue.pop()
            response = await handler.download_request(Request(url, meta={"download_timeout": 30}))
            received += len(response.body)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(inflight)))
    return time.process_time() - cpu0, time.perf_counter() - wall0, received


async def _bench(web: SynthWeb, args: argparse.Namespace) -> dict[str, Any]:
    by_host: dict[str, list[str]] = {}
    for url in sorted(web.pages):
        by_host.setdefault(url.split("/")[2], []).append(url)
    urls = [u for group in itertools.zip_longest(*by_host.values()) for u in group if u]
    settings = {
        "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
        "LARBIN_FETCH_IDLE_TIMEOUT": 240,
        "DOWNLOAD_MAXSIZE": 0,
        "DOWNLOAD_WARNSIZE": 0,
    }
    results: dict[str, list[float]] = {name: [] for name in HANDLERS}
    for rep in range(args.reps):
        order = list(HANDLERS) if rep % 2 == 0 else list(reversed(HANDLERS))
        for name in order:
            crawler = get_crawler(settings_dict=settings)
            handler = build_from_crawler(load_object(HANDLERS[name]), crawler)
            await _fetch_all(handler, urls[:200], args.inflight)  # warm up: connections, caches
            cpu, wall, size = await _fetch_all(handler, urls, args.inflight)
            await handler.close()
            results[name].append(cpu / len(urls) * 1e6)
            print(
                f"{name:7s} rep {rep}: {cpu / len(urls) * 1e6:7.1f} us CPU/response, "
                f"{len(urls) / wall:7.0f} responses/s, {size / len(urls):.0f} B/page"
            )
    med = {name: statistics.median(v) for name, v in results.items()}
    return {
        "us_cpu_per_response": med,
        "ratio": med["lean"] / med["scrapy"],
        "saving_us": med["scrapy"] - med["lean"],
        "responses": len(urls),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--pages", type=int, default=100)
    p.add_argument("--inflight", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    from twisted.internet import reactor

    out: dict[str, Any] = {}

    async def run() -> None:
        try:
            with SynthWeb(args.hosts, args.pages) as web:
                out.update(await _bench(web, args))
        finally:
            reactor.stop()  # type: ignore[attr-defined]

    reactor.callWhenRunning(lambda: deferred_from_coro(run()))  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
