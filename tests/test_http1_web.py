"""Both download handlers on a real web server (nginx, ``testweb.synthweb``): same answers.

Every page of a small synthetic web, its robots.txt, a missing page and a HEAD, fetched through
Scrapy's handler and through the lean one, 16 at a time over keep-alive connections: the
responses must be equal (class, status, headers but ``Date``, body, flags, IP, protocol).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from scrapy import Request

from tests.support.http1 import make_handler, plain_reactor, run
from testweb.synthweb import SynthWeb

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


def _summary(response: Any) -> tuple[Any, ...]:
    headers = [(k, v) for k, v in response.headers.items() if k != b"Date"]
    return (
        type(response).__name__,
        response.url,
        response.status,
        headers,
        response.body,
        response.flags,
        str(response.ip_address),
        response.protocol,
    )


async def _fetch(handler: Any, requests: list[Request]) -> list[tuple[Any, ...]]:
    sem = asyncio.Semaphore(16)

    async def one(request: Request) -> tuple[Any, ...]:
        async with sem:
            return _summary(await handler.download_request(request))

    return list(await asyncio.gather(*(one(r) for r in requests)))


def test_same_answers_from_nginx() -> None:
    with plain_reactor(), SynthWeb(hosts=2, pages_per_host=20, dead=0) as web:
        urls = sorted(web.pages)
        extra = [web.seeds[0] + "robots.txt", web.seeds[0] + "missing.html"]

        def requests() -> list[Request]:
            return [Request(u) for u in urls + extra] + [
                Request(urls[3], method="HEAD"),
                Request(urls[4], headers={"Accept-Encoding": "gzip"}),
            ]

        got = {}
        for name in ("scrapy", "lean"):
            handler, _ = make_handler(name)
            got[name] = run(_fetch(handler, requests()), timeout=60)
            run(handler.close())
    assert got["lean"] == got["scrapy"]
    statuses = [s[2] for s in got["lean"]]
    assert statuses.count(200) == len(urls) + 3 and 404 in statuses
    assert all(len(s[4]) > 1000 for s in got["lean"][: len(urls)])
