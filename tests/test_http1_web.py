"""Both download handlers on a real web server (nginx, ``testweb.synthweb``): same answers.

Every page of a small synthetic web, its robots.txt, a missing page and a HEAD, fetched through
Scrapy's handler and through the lean one, 16 at a time over keep-alive connections: the
responses must be equal (class, status, headers but ``Date``, body, flags, IP, protocol).
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import psutil
import pytest
from scrapy import Request

from tests.support.http1 import BASE_SETTINGS, HANDLERS, make_handler, plain_reactor, run, settle
from testweb.synthweb import SynthWeb

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

CONNECTIONS = 100  # idle keep-alive connections held at once
# where a connection's received bytes are allocated: Twisted's socket read, TLS's read of it
SOCKET_READS = [
    tracemalloc.Filter(True, "*/twisted/internet/tcp.py"),
    tracemalloc.Filter(True, "*/twisted/protocols/tls.py"),
    tracemalloc.Filter(True, "*/OpenSSL/SSL.py"),
]


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


async def _fetch(handler: Any, requests: list[Request], at_once: int = 16) -> list[tuple[Any, ...]]:
    sem = asyncio.Semaphore(at_once)

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


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_an_idle_connection_keeps_nothing_of_its_last_answer(tls: bool, tmp_path: Path) -> None:
    """A broad crawl keeps thousands of keep-alive connections idle between a site's fetches
    (up to the server's keep-alive timeout): one must not hold the bytes of the answer it last
    carried (the socket read its head came in, up to 64 KB) until its next request."""
    with (
        plain_reactor(),
        SynthWeb(hosts=1, pages_per_host=5, dead=0, tls=tls, workdir=str(tmp_path)) as web,
    ):
        handler, _ = make_handler("lean", CONCURRENT_REQUESTS_PER_DOMAIN=CONNECTIONS)
        url = sorted(u for u in web.pages if u.startswith(web.seeds[0]))[1]
        run(handler.download_request(Request(url)))  # TLS: the shared context, once
        gc.collect()
        tracemalloc.start()
        try:
            answers = run(_fetch(handler, [Request(url)] * CONNECTIONS, CONNECTIONS), timeout=60)
            body = len(answers[0][4])
            del answers
            gc.collect()
            reads = tracemalloc.take_snapshot().filter_traces(SOCKET_READS)
        finally:
            tracemalloc.stop()
        idle = sum(len(conns) for conns in handler._pool.idle.values())
        run(handler.close())
    assert body > 20_000 and idle >= CONNECTIONS * 0.9, (body, idle)
    # blocks of 8 KB or more still alive that socket reads (and TLS's reads of them) made: the
    # received bytes themselves (the connections' own objects there are a few hundred bytes)
    held = [trace.size for trace in reads.traces if trace.size >= 8192]
    assert len(held) < idle / 10, (len(held), idle, sum(held) / idle, body)


def test_idle_connections_are_capped_least_recently_used_first(tmp_path: Path) -> None:
    """Past ``LARBIN_FETCH_IDLE_MAX`` idle keep-alive connections the least recently used is
    closed: a broad crawl would otherwise keep every site's last connection (tens of KB of TLS
    state each) until its server closes it. The ones kept are the newest, and they still
    carry requests."""
    with (
        plain_reactor(),
        SynthWeb(hosts=1, pages_per_host=5, dead=0, workdir=str(tmp_path)) as web,
    ):
        handler, crawler = make_handler(
            "lean", CONCURRENT_REQUESTS_PER_DOMAIN=40, LARBIN_FETCH_IDLE_MAX=10
        )
        url = sorted(u for u in web.pages if u.startswith(web.seeds[0]))[1]
        start = web.log_offset()
        run(_fetch(handler, [Request(url)] * 40, 40), timeout=60)
        idle = sum(len(conns) for conns in handler._pool.idle.values())
        again = run(_fetch(handler, [Request(url)] * 10, 10), timeout=60)
        entries = web.access_log_entries(start)
        run(handler.close())
    assert idle == 10, idle
    assert crawler.stats.get_value("larbin/http1/idle_closed") == 30
    assert all(answer[2] == 200 for answer in again)
    assert len({e.connection for e in entries}) == 40, "the 10 kept carried the last 10"


def test_http_and_https_share_one_cap_on_connections(tmp_path: Path) -> None:
    """Scrapy builds a download handler for each scheme in ``DOWNLOAD_HANDLERS``: the caps on
    open and idle connections are the crawl's (``LARBIN_FETCH_CONNECTIONS_MAX`` comes from the
    process's descriptor limit), not each scheme's, or a crawl of http and https sites holds
    twice the connections and descriptors it was given."""
    from scrapy import Spider, signals
    from scrapy.core.downloader.handlers import DownloadHandlers
    from scrapy.utils.test import get_crawler

    from larbinscrapy.conf.defaults import DOWNLOAD_HANDLERS

    def sockets() -> int:
        """This process's connections to the two servers: a count of all its sockets moves
        when one left by an earlier test in the same worker is collected meanwhile."""
        return sum(
            1
            for c in psutil.Process().net_connections(kind="tcp")
            if c.raddr and c.raddr.port in ports
        )

    with (
        plain_reactor(),
        SynthWeb(hosts=1, pages_per_host=5, dead=0, workdir=str(tmp_path / "a")) as web,
        SynthWeb(hosts=1, pages_per_host=5, dead=0, tls=True, workdir=str(tmp_path / "b")) as tls,
    ):
        crawler = get_crawler(
            Spider,
            {
                **BASE_SETTINGS,
                "DOWNLOAD_HANDLERS": DOWNLOAD_HANDLERS,
                "LARBIN_FETCH_HANDLER": HANDLERS["lean"],
                "CONCURRENT_REQUESTS_PER_DOMAIN": 40,
                "LARBIN_FETCH_CONNECTIONS_MAX": 16,
                "LARBIN_FETCH_IDLE_MAX": 10,
                "EXTENSIONS_BASE": {},  # engine_stopped closes the handlers here, nothing else
            },
        )
        crawler.spider = Spider("t")
        handlers = DownloadHandlers(crawler)
        urls = [sorted(u for u in w.pages if u.startswith(w.seeds[0]))[1] for w in (web, tls)]
        ports = {urlsplit(u).port for u in urls}
        before, most = sockets(), [0]

        async def watch() -> None:
            while True:
                most[0] = max(most[0], sockets() - before)
                await asyncio.sleep(0.002)

        async def fetch_all() -> list[int]:
            watcher = asyncio.ensure_future(watch())
            fetched = [handlers.download_request_async(Request(u)) for u in urls for _ in range(40)]
            answers = await asyncio.gather(*fetched)
            watcher.cancel()
            return [answer.status for answer in answers]

        statuses = run(fetch_all(), timeout=60)
        settle(0.2)
        idle = sockets() - before
        run(crawler.signals.send_catch_log_async(signal=signals.engine_stopped))
    assert statuses == [200] * 80
    assert most[0] <= 16, f"{most[0]} connections open at once, the cap is 16"
    assert idle == 10, f"{idle} idle connections kept, the cap is 10"


def test_tls_connections_leave_no_connection_state_for_the_cyclic_collector(
    tmp_path: Path,
) -> None:
    """A TLS error (a server's close without ``close_notify``) made Twisted keep its failure
    in a cycle with the frames that handled it: with them the whole connection, OpenSSL's
    state included (tens of KB), lived until a full collection, and a broad crawl's hundreds
    of thousands of connections piled up between two of them. A certificate check's verify
    callback did the same. What is left to the collector is a few small objects a
    connection (the verify callback Scrapy's TLS options set and replace at once)."""
    import OpenSSL.SSL

    with (
        plain_reactor(),
        SynthWeb(hosts=1, pages_per_host=5, dead=0, tls=True, workdir=str(tmp_path)) as web,
    ):
        url = sorted(u for u in web.pages if u.startswith(web.seeds[0]))[1]
        handler, _crawler = make_handler("lean", CONCURRENT_REQUESTS_PER_DOMAIN=20)
        run(handler.download_request(Request(url)))  # one-time state: the shared context
        while gc.collect():  # earlier tests' garbage, and what freeing it left
            pass
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            answers = run(_fetch(handler, [Request(url)] * 20, 20), timeout=60)
            run(handler.close())  # the idle connections closed: the server sees no close_notify
            settle(0.3)  # their connectionLost
            gc.collect()
            left = list(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert [answer[2] for answer in answers] == [200] * 20
    kinds = {type(o) for o in left}
    assert OpenSSL.SSL.Connection not in kinds, "an OpenSSL connection waits for the collector"
    assert not any(kind.__name__ == "frame" for kind in kinds), "frames wait for the collector"
    # ~20 a connection left (the replaced verify callback's), ~120 before
    assert len(left) < 30 * 20, f"{len(left)} objects in cycles after 20 TLS connections"
