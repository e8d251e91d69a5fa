"""The lean HTTP/1.1 handler against Scrapy's, case by case, on a scripted raw-socket server.

Every case runs through both handlers; the outcome (response class, status, headers in order,
body, flags, protocol, IP; or exception class, its cause's class and the failure kind
``larbinscrapy.politeness.failures.classify`` gives) must be the one the case expects, for both: a
difference between the handlers is a failing test.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest
from scrapy import Request, signals
from scrapy.exceptions import StopDownload

from larbinscrapy.politeness.failures import classify
from tests.support.http1 import (
    RawWeb,
    make_handler,
    plain_reactor,
    run,
    settle,
    silent_listener,
)
from tests.support.wait import wait_for

BOTH = ["scrapy", "lean"]
OK = b"HTTP/1.1 200 OK\r\n"
PAGE = OK + b"Content-Type: text/html\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello"

# path: (server actions, request meta, expected outcome)
CASES: dict[str, tuple[list[Any], dict[str, Any], tuple[Any, ...]]] = {
    "/page": (
        [PAGE],
        {},
        (
            "HtmlResponse",
            200,
            [("Content-Length", ["5"]), ("Content-Type", ["text/html"]), ("X-A", ["1", "2"])],
            b"hello",
            [],
        ),
    ),
    "/chunked": (
        [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"],
        {},
        ("TextResponse", 200, [], b"helloabc", []),
    ),
    "/close-delimited": (
        [b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello", "close"],
        {},
        ("TextResponse", 200, [("Content-Type", ["text/plain"])], b"hello", ["partial"]),
    ),
    # names as any casing, one header given twice in two casings: stored as Scrapy's Headers do
    "/casing": (
        [
            OK + b"content-TYPE: text/plain\r\nx-lower: a\r\nX-LOWER: b\r\n"
            b"content-length: 2\r\n\r\nok"
        ],
        {},
        (
            "TextResponse",
            200,
            [("Content-Length", ["2"]), ("Content-Type", ["text/plain"]), ("X-Lower", ["a", "b"])],
            b"ok",
            [],
        ),
    ),
    "/no-phrase": (
        [b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"])], b"ok", []),
    ),
    "/bare-lf": (
        [b"HTTP/1.1 200 OK\nContent-Length: 2\nX-B:  spaced  \n\nok"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"]), ("X-B", ["spaced"])], b"ok", []),
    ),
    "/no-colon": (
        [OK + b"BadLine\r\nContent-Length: 2\r\nX-C: c\r\n\r\nok"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"]), ("X-C", ["c"])], b"ok", []),
    ),
    "/folded": (
        [OK + b"X-F: one\r\n two\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"]), ("X-F", ["one two"])], b"ok", []),
    ),
    "/same-lengths": (
        [OK + b"Content-Length: 2\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"])], b"ok", []),
    ),
    "/te-and-cl": (
        [OK + b"Content-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        {},
        ("TextResponse", 200, [], b"ok", []),
    ),
    "/te-identity": (
        [OK + b"Transfer-Encoding: identity\r\n\r\nok", "close"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/te-gzip-chunked": (
        [OK + b"Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/space-before-colon": (
        [OK + b"X-A : v\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/empty-name": (
        [OK + b": v\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/no-content": (
        [b"HTTP/1.1 204 No Content\r\nX-D: d\r\n\r\n"],
        {},
        ("TextResponse", 204, [("Content-Length", ["0"]), ("X-D", ["d"])], b"", []),
    ),
    "/not-modified": (
        [b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n"],
        {},
        ("TextResponse", 304, [("Content-Length", ["0"])], b"", []),
    ),
    "/continue": (
        [b"HTTP/1.1 100 Continue\r\n\r\n" + PAGE],
        {},
        (
            "HtmlResponse",
            200,
            [("Content-Length", ["5"]), ("Content-Type", ["text/html"]), ("X-A", ["1", "2"])],
            b"hello",
            [],
        ),
    ),
    "/short-body": (
        [OK + b"Content-Length: 2\r\n\r\nokEXTRA"],
        {},
        ("TextResponse", 200, [("Content-Length", ["2"])], b"ok", []),
    ),
    "/garbage": ([b"GARBAGE\r\n\r\n"], {}, ("DownloadFailedError", "ResponseFailed", "malformed")),
    "/bad-status": (
        [b"HTTP/1.1 2x0 OK\r\n\r\n"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/conflicting-lengths": (
        [OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\nok"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/bad-length": (
        [OK + b"Content-Length: x\r\n\r\nok"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/close-at-once": (
        ["close"],
        {},
        ("DownloadFailedError", "ResponseNeverReceived", "malformed"),
    ),
    "/reset-at-once": (["reset"], {}, ("DownloadFailedError", "ResponseNeverReceived", "reset")),
    "/close-in-head": (
        [OK + b"Content-Le", "close"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/reset-in-head": (
        [OK + b"Content-Le", 0.2, "reset"],
        {},
        ("DownloadFailedError", "ResponseFailed", "reset"),
    ),
    "/big-header": (
        [OK + b"X-Big: " + b"a" * (1024 * 1024) + b"\r\n\r\n"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/long-line": (
        [OK + b"X-Long: " + b"a" * 20000 + b"\r\nContent-Length: 2\r\n\r\nok"],
        {},
        ("DownloadFailedError", "ResponseFailed", "malformed"),
    ),
    "/many-lines": (
        [OK + b"".join(b"X-H%d: v\r\n" % i for i in range(3000)) + b"Content-Length: 2\r\n\r\nok"],
        {},
        (
            "TextResponse",
            200,
            [("Content-Length", ["2"]), *((f"X-H{i}", ["v"]) for i in range(3000))],
            b"ok",
            [],
        ),
    ),
    "/reset-in-body": (
        [OK + b"Content-Length: 100\r\n\r\nhalf", 0.2, "reset"],
        {},
        ("ResponseDataLossError", "ResponseFailed", "reset"),
    ),
    "/lying-length": (
        [OK + b"Content-Length: 100\r\n\r\nhalf", "close"],
        {},
        ("ResponseDataLossError", "ResponseFailed", "reset"),
    ),
    "/lying-length-allowed": (
        [OK + b"Content-Length: 100\r\n\r\nhalf", "close"],
        {"download_fail_on_dataloss": False},
        ("TextResponse", 200, [("Content-Length", ["100"])], b"half", ["dataloss"]),
    ),
    "/chunked-cut": (
        [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhel", "close"],
        {},
        ("ResponseDataLossError", "ResponseFailed", "reset"),
    ),
    "/bad-chunk": (
        [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"],
        {},
        ("ResponseDataLossError", "ResponseFailed", "reset"),
    ),
    "/bad-chunk-allowed": (
        [OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"],
        {"download_fail_on_dataloss": False},
        ("TextResponse", 200, [], b"hello", ["dataloss"]),
    ),
    "/tarpit": (["hang"], {"download_timeout": 0.5}, ("DownloadTimeoutError", None, "timeout")),
    "/expected-too-big": (
        [OK + b"Content-Length: 50\r\n\r\n" + b"x" * 50],
        {"download_maxsize": 10},
        ("DownloadCancelledError", None, None),
    ),
    "/too-big": (
        [OK + b"Transfer-Encoding: chunked\r\n\r\n20\r\n" + b"x" * 32 + b"\r\n0\r\n\r\n"],
        {"download_maxsize": 10},
        ("DownloadCancelledError", "CancelledError", None),
    ),
}


def outcome(
    handler_name: str, path: str, web: RawWeb, meta: dict[str, Any], **settings: Any
) -> tuple[Any, ...]:
    """What a download of ``path`` gives, in comparable form."""
    handler, _ = make_handler(handler_name, **settings)
    try:
        response = run(handler.download_request(Request(web.url(path), meta=dict(meta))))
    except Exception as e:
        cause = e.__cause__
        return (type(e).__name__, type(cause).__name__ if cause else None, classify(e))
    finally:
        run(handler.close())
        wait_for(lambda: not web.open, 5, "the handler's connections closed", pause=settle)
    assert response.ip_address is not None
    assert str(response.ip_address) == "127.0.0.1"
    assert response.protocol in {"HTTP/1.1", "HTTP/1.0"}
    headers = [(k.decode(), [v.decode() for v in vs]) for k, vs in response.headers.items()]
    return (type(response).__name__, response.status, headers, response.body, list(response.flags))


@pytest.fixture(scope="module", autouse=True)
def _threads() -> Any:
    with plain_reactor():
        yield


@pytest.fixture(scope="module")
def web() -> Any:
    server = RawWeb({path: case[0] for path, case in CASES.items()})
    yield server
    server.stop()


@pytest.mark.parametrize("handler", BOTH)
@pytest.mark.parametrize("path", list(CASES))
def test_outcome(web: RawWeb, handler: str, path: str) -> None:
    _, meta, expected = CASES[path]
    assert outcome(handler, path, web, meta) == expected


def test_refused_and_dns(web: RawWeb) -> None:
    """A port where nothing listens and a name that does not resolve: Scrapy's classes."""
    closed = RawWeb({})
    url = closed.url("/")
    closed.stop()
    for name in BOTH:
        handler, _ = make_handler(name)
        with pytest.raises(Exception) as info:  # noqa: PT011 - the class is the assertion
            run(handler.download_request(Request(url)))
        assert type(info.value).__name__ == "DownloadConnectionRefusedError", name
        assert classify(info.value) == "refused"
        run(handler.close())


@pytest.mark.parametrize("handler", BOTH)
def test_a_deadline_that_passes_while_connecting_is_a_timeout(handler: str) -> None:
    """The download's time runs out before its connection is made (a server that never
    answers the SYN, or a crawl whose reactor was held up): a timeout, the URL's failure.
    Our own abort of the dial must not read as the host being gone (``unreachable``): three of
    those in a row drop the IP, with every site on it (92,381 live hosts in a million-host
    crawl after a 41-second stall at its start)."""
    with silent_listener() as port:
        h, _ = make_handler(handler)
        with pytest.raises(Exception) as info:  # noqa: PT011 - the class is the assertion
            run(
                h.download_request(
                    Request(f"http://127.0.0.1:{port}/", meta={"download_timeout": 0.5})
                )
            )
        run(h.close())
    assert type(info.value).__name__ == "DownloadTimeoutError"
    assert classify(info.value) == "timeout"


@pytest.mark.parametrize("handler", BOTH)
def test_request_bytes_as_twisted_writes_them(handler: str) -> None:
    """The request head and body byte for byte: order, capitalisation, Host, Content-Length."""
    web = RawWeb({"/p": [PAGE]})
    try:
        h, _ = make_handler(handler)
        port = web.port.getHost().port
        run(
            h.download_request(
                Request(
                    web.url("/p?q=1;x"),
                    headers={
                        "User-Agent": "larbin",
                        "x-lower": "a",
                        "Etag": "e",
                        "X-Two": ["1", "2"],
                        "X-Nl": "a\r\nb",
                    },
                )
            )
        )
        run(h.download_request(Request(web.url("/p"), method="POST", body=b"abc")))
        run(h.download_request(Request(web.url("/p"), method="POST")))
        run(h.download_request(Request(web.url("/p"), headers={"Host": "other.test"})))
        run(h.close())
    finally:
        web.stop()
    host = f"127.0.0.1:{port}".encode()
    assert web.requests == [
        b"GET /p?q=1;x HTTP/1.1\r\nUser-Agent: larbin\r\nX-Lower: a\r\nETag: e\r\n"
        b"X-Two: 1\r\nX-Two: 2\r\nX-Nl: a b\r\nHost: " + host + b"\r\n\r\n",
        b"POST /p HTTP/1.1\r\nContent-Length: 3\r\nHost: " + host + b"\r\n\r\nabc",
        b"POST /p HTTP/1.1\r\nContent-Length: 0\r\nHost: " + host + b"\r\n\r\n",
        b"GET /p HTTP/1.1\r\nHost: other.test\r\n\r\n",
    ]


@pytest.mark.parametrize("handler", BOTH)
def test_keep_alive_reuse_and_close(handler: str) -> None:
    """Sequential requests share one connection; ``Connection: close`` is not reused."""
    close = OK + b"Connection: close\r\nContent-Length: 2\r\n\r\nok"
    web = RawWeb({"/p": [PAGE], "/close": [close]})
    try:
        h, _ = make_handler(handler)
        for _ in range(3):
            run(h.download_request(Request(web.url("/p"))))
        assert web.connections == 1
        run(h.download_request(Request(web.url("/close"))))
        run(h.download_request(Request(web.url("/p"))))
        assert web.connections == 2
        run(h.close())
        wait_for(lambda: not web.open, 5, "close() to close the idle connection", pause=settle)
    finally:
        web.stop()


def test_answers_leave_nothing_for_the_cyclic_collector() -> None:
    """An answer read, and a connection closed, free what they used by reference counting:
    a broad crawl keeps many hosts' state alive, and every cycle left per page makes each of
    the collector's passes over that state come sooner (issue 35, point 3)."""
    close = OK + b"Connection: close\r\nContent-Length: 2\r\n\r\nok"
    chunked = OK + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    web = RawWeb({"/p": [PAGE], "/close": [close], "/chunked": [chunked]})
    try:
        h, _ = make_handler("lean")
        run(h.download_request(Request(web.url("/p"))))  # one-time state (the pool, a slot)
        while gc.collect():  # earlier tests' garbage, and what freeing it left
            pass
        gc.disable()
        try:
            for _ in range(20):
                for path in ("/p", "/chunked", "/close"):
                    assert run(h.download_request(Request(web.url(path)))).status == 200
            settle()  # the closed connections' connectionLost
            left = gc.collect()
        finally:
            gc.enable()
        assert web.connections >= 20  # every /close answer closed its connection
        assert left < 20, f"{left} objects in cycles after 60 answers"
        run(h.close())
    finally:
        web.stop()


@pytest.mark.parametrize("handler", BOTH)
def test_stale_connection_sent_again_once(handler: str) -> None:
    """A reused connection closed before any byte: a GET goes again on a new connection."""
    web = RawWeb({"/p": [PAGE], "/stale": ["drop_if_reused", PAGE]})
    try:
        h, _ = make_handler(handler)
        run(h.download_request(Request(web.url("/p"))))
        response = run(h.download_request(Request(web.url("/stale"))))
        assert response.body == b"hello"
        assert web.connections == 2
        assert [r.split(b" ")[1] for r in web.requests] == [b"/p", b"/stale", b"/stale"]
        run(h.close())
    finally:
        web.stop()


@pytest.mark.parametrize("handler", BOTH)
def test_head_keeps_its_length_and_no_body(handler: str) -> None:
    web = RawWeb(
        {"/h": [OK + b"Content-Length: 1234\r\nContent-Type: text/html\r\n\r\n"], "/p": [PAGE]}
    )
    try:
        h, _ = make_handler(handler)
        response = run(h.download_request(Request(web.url("/h"), method="HEAD")))
        assert response.body == b""
        assert response.headers.getlist("Content-Length") == [b"1234"]
        assert list(response.headers) == [b"Content-Length", b"Content-Type"]
        assert run(h.download_request(Request(web.url("/p")))).body == b"hello"
        assert web.connections == 1
        run(h.close())
    finally:
        web.stop()


@pytest.mark.parametrize("handler", BOTH)
@pytest.mark.parametrize("where", ["headers", "bytes"])
@pytest.mark.parametrize("fail", [False, True])
def test_stop_download_from_signals(handler: str, where: str, fail: bool) -> None:
    """``StopDownload`` from a receiver: flag ``download_stopped``, body per ``fail``."""
    big = OK + b"Content-Length: 20000\r\nContent-Type: text/html\r\n\r\n" + b"x" * 20000
    web = RawWeb({"/big": [big]})
    seen: dict[str, Any] = {}
    try:
        h, crawler = make_handler(handler)

        def on_headers(headers: Any, body_length: Any, request: Any, spider: Any) -> None:
            seen["headers"] = dict(headers)
            seen["body_length"] = body_length
            if where == "headers":
                raise StopDownload(fail=fail)

        def on_bytes(data: bytes, request: Any, spider: Any) -> None:
            seen.setdefault("chunks", []).append(data)
            if where == "bytes":
                raise StopDownload(fail=fail)

        crawler.signals.connect(on_headers, signal=signals.headers_received)
        crawler.signals.connect(on_bytes, signal=signals.bytes_received)
        request = Request(web.url("/big"))
        if fail:
            with pytest.raises(StopDownload) as info:
                run(h.download_request(request))
            response = info.value.response
        else:
            response = run(h.download_request(request))
        run(h.close())
    finally:
        web.stop()
    assert "download_stopped" in response.flags
    assert seen["body_length"] == 20000
    assert seen["headers"][b"Content-Length"] == [b"20000"]
    assert "download_latency" in request.meta
    if where == "headers":
        assert response.body == b""
        assert "chunks" not in seen
    else:
        assert response.body == seen["chunks"][0]
        assert len(seen["chunks"]) == 1


@pytest.mark.parametrize("handler", BOTH)
def test_cancel_closes_the_connection(handler: str) -> None:
    """A cancelled download (PageDeadlineHandler's timeout) closes its connection."""
    import asyncio

    web = RawWeb({"/tarpit": ["hang"]})
    try:
        h, _ = make_handler(handler)

        async def cancel_soon() -> None:
            task = asyncio.ensure_future(h.download_request(Request(web.url("/tarpit"))))
            while web.connections < 1:  # the request reached the server
                await asyncio.sleep(0.01)
            assert web.connections == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        run(cancel_soon())
        wait_for(lambda: web.lost == 1, 5, "the cancelled connection closed", pause=settle)
        run(h.close())
    finally:
        web.stop()


class _NameMap:
    """A resolver for the reactor (``IResolverSimple``) that knows a fixed map of names."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def getHostByName(self, name: str, timeout: Any = ()) -> Any:
        from twisted.internet import defer
        from twisted.internet.error import DNSLookupError

        ip = self.names.get(name)
        return defer.succeed(ip) if ip else defer.fail(DNSLookupError(name))


@pytest.mark.parametrize("handler", BOTH)
def test_names_through_the_reactor_resolver(web: RawWeb, handler: str) -> None:
    """Host names go through the reactor's resolver; one it cannot resolve is ``dns``."""
    from twisted.internet import reactor
    from twisted.internet.interfaces import IResolverSimple
    from zope.interface import directlyProvides

    resolver = _NameMap({"known.test": "127.0.0.1"})
    directlyProvides(resolver, IResolverSimple)
    old = reactor.installResolver(resolver)  # type: ignore[attr-defined]
    try:
        h, _ = make_handler(handler)
        port = web.port.getHost().port
        response = run(h.download_request(Request(f"http://known.test:{port}/page")))
        assert response.body == b"hello"
        assert str(response.ip_address) == "127.0.0.1"
        assert web.requests[-1].endswith(f"Host: known.test:{port}\r\n\r\n".encode())
        with pytest.raises(Exception) as info:  # noqa: PT011 - the class is the assertion
            run(h.download_request(Request(f"http://unknown.test:{port}/page")))
        assert type(info.value).__name__ == "CannotResolveHostError"
        assert classify(info.value) == "dns"
        run(h.close())
    finally:
        reactor.installResolver(old)  # type: ignore[attr-defined]


@pytest.mark.parametrize("handler", BOTH)
def test_download_latency_counts_to_the_headers(handler: str) -> None:
    """``download_latency``: from the start (connect included) to the headers, not the body."""
    web = RawWeb({"/slow": [0.3, OK + b"Content-Length: 4\r\n\r\nab", 1.5, b"cd"]})
    try:
        h, _ = make_handler(handler)
        request = Request(web.url("/slow"))
        response = run(h.download_request(request))
        run(h.close())
    finally:
        web.stop()
    assert response.body == b"abcd"
    assert 0.3 <= request.meta["download_latency"] < 1.5  # the body came 1.5 s after


@pytest.mark.parametrize("handler", BOTH)
def test_idle_connections_bounded_per_host(handler: str) -> None:
    """At most ``CONCURRENT_REQUESTS_PER_DOMAIN`` idle connections are kept per host."""
    import asyncio

    web = RawWeb({"/slow": [0.3, PAGE]})
    try:
        h, _ = make_handler(handler, CONCURRENT_REQUESTS_PER_DOMAIN=2)

        async def four() -> None:
            await asyncio.gather(*(h.download_request(Request(web.url("/slow"))) for _ in range(4)))

        run(four())
        wait_for(
            lambda: web.connections == 4 and len(web.open) == 2,
            5,
            "4 connections made, 2 kept open",
            pause=settle,
        )
        run(h.close())
    finally:
        web.stop()


def test_idle_connections_closed_after_the_timeout() -> None:
    web = RawWeb({"/p": [PAGE]})
    try:
        h, _ = make_handler("lean", LARBIN_FETCH_IDLE_TIMEOUT=0.4)
        run(h.download_request(Request(web.url("/p"))))
        idle_from = time.monotonic()
        settle(0.1)  # the behaviour: still open 0.1 s into its 0.4 s idle timeout
        assert len(web.open) == 1
        wait_for(lambda: not web.open, 5, "the idle connection closed by the sweep", pause=settle)
        # the sweep runs every timeout / 2: closed by 0.6 s idle at the latest
        assert time.monotonic() - idle_from < 1.1
        run(h.download_request(Request(web.url("/p"))))
        assert web.connections == 2
        run(h.close())
    finally:
        web.stop()


def test_proxy_and_https_go_to_scrapys_handler() -> None:
    """``meta["proxy"]`` (and https) are Scrapy's handler's: the proxy sees an absolute URI."""
    web = RawWeb({"http://example.test/p": [PAGE]})
    try:
        h, crawler = make_handler("lean")
        response = run(
            h.download_request(Request("http://example.test/p", meta={"proxy": web.base}))
        )
        assert response.body == b"hello"
        assert web.requests[0].startswith(b"GET http://example.test/p HTTP/1.1\r\n")
        assert crawler.stats.get_value("larbin/http1/delegated") == 1
        run(h.close())
    finally:
        web.stop()
