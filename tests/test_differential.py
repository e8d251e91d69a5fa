"""Odd answers real servers send, through the lean handler and Scrapy's, on a raw socket.

Each case is one answer's raw bytes; both handlers must give the outcome the case expects
(response class, status, headers, body, protocol; or exception class, its cause's class and
the failure kind). Where llhttp refuses what Twisted accepts, the head is read again the
Twisted way (``http1conn.lenient_head``) and llhttp only frames the body.
"""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request

from larbinscrapy.politeness.failures import classify
from tests.support.http1 import RawWeb, make_handler, plain_reactor, run, settle

OK = b"HTTP/1.1 200 OK\r\n"
MALFORMED = ("DownloadFailedError", "ResponseFailed", "malformed")
DATALOSS = ("ResponseDataLossError", "ResponseFailed", "reset")
CHUNKED = b"Transfer-Encoding: chunked\r\n\r\n"


def _ok(
    headers: list[tuple[str, list[bytes]]],
    body: bytes = b"ok",
    status: int = 200,
    protocol: str = "HTTP/1.1",
) -> tuple[Any, ...]:
    return ("TextResponse", status, headers, body, protocol)


def _control(byte: bytes) -> tuple[list[Any], dict[str, Any], tuple[Any, ...]]:
    """A control byte inside a header value: kept as it is (Twisted does not check values)."""
    return (
        [OK + b"X-C: a" + byte + b"b\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"]), ("X-C", [b"a" + byte + b"b"])]),
    )


# path: (server actions, Request keyword arguments, expected outcome)
CASES: dict[str, tuple[list[Any], dict[str, Any], tuple[Any, ...]]] = {
    "/ctl-01": _control(b"\x01"),
    "/ctl-00": _control(b"\x00"),
    "/ctl-0b": _control(b"\x0b"),
    "/ctl-0c": _control(b"\x0c"),
    "/ctl-7f": _control(b"\x7f"),
    # a lone CR in a value: Twisted's Headers turn it into a space
    "/ctl-cr": (
        [OK + b"X-C: a\rb\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"]), ("X-C", [b"a b"])]),
    ),
    # a chunked answer with a control byte: llhttp still frames the chunks
    "/ctl-chunked": (
        [OK + b"X-C: a\x01b\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        {},
        _ok([("X-C", [b"a\x01b"])]),
    ),
    # Content-Length is 1*DIGIT (RFC 9110 8.6): Python's int() would take these, Twisted does not
    "/length-plus": ([OK + b"Content-Length: +2\r\n\r\nok"], {}, MALFORMED),
    "/length-underscore": ([OK + b"Content-Length: 1_0\r\n\r\n0123456789"], {}, MALFORMED),
    "/length-padded": (
        [OK + b"Content-Length: 007\r\n\r\n0123456"],
        {},
        _ok([("Content-Length", [b"7"])], b"0123456"),
    ),
    # a length no body can have: the DOWNLOAD_MAXSIZE cancellation, not "malformed"
    "/length-huge": (
        [OK + b"Content-Length: 99999999999999999999999\r\n\r\nok"],
        {},
        ("DownloadCancelledError", None, None),
    ),
    # a HEAD answer has no body: its lengths are not read, even two that disagree
    "/head-two-lengths": (
        [OK + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n"],
        {"method": "HEAD"},
        _ok([("Content-Length", [b"2", b"3"])], b""),
    ),
    # status lines Twisted reads: any proto/major.minor, any integer status
    "/http-1.2": (
        [b"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"])], protocol="HTTP/1.2"),
    ),
    "/lower-case": (
        [b"http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"])], protocol="http/1.1"),
    ),
    "/status-2000": (
        [b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"])], status=2000),
    ),
    "/version-zeros": (
        [b"HTTP/01.01 200 OK\r\nContent-Length: 2\r\n\r\nok"],
        {},
        _ok([("Content-Length", [b"2"])]),
    ),
    "/no-version-dot": ([b"HTTP/1 200 OK\r\nContent-Length: 2\r\n\r\nok"], {}, MALFORMED),
    # issue #34: a 101 to a request that asked no upgrade is one more interim answer
    "/interim-101": (
        [
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"
            + OK
            + b"Content-Length: 2\r\n\r\nok"
        ],
        {},
        _ok([("Content-Length", [b"2"])]),
    ),
    "/interim-101-100": (
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching\r\n\r\n"
            + OK
            + b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
        ],
        {},
        _ok([]),
    ),
    # chunk extensions: a bare ";" (no name) is ignored as Twisted ignores it; a space before
    # the ";" is not a chunk size (both: data loss)
    "/chunk-ext-bare": (
        [OK + CHUNKED + b"66;\r\n" + b"x" * 0x66 + b"\r\n0\r\n\r\n"],
        {},
        _ok([], b"x" * 0x66),
    ),
    "/chunk-ext-named": ([OK + CHUNKED + b"2;a=b;c\r\nok\r\n0;z\r\n\r\n"], {}, _ok([])),
    "/chunk-ext-space": ([OK + CHUNKED + b"2 ;\r\nok\r\n0\r\n\r\n"], {}, DATALOSS),
    "/chunk-ext-control": ([OK + CHUNKED + b"2;\x01\r\nok\r\n0\r\n\r\n"], {}, DATALOSS),
    # trailers are read and dropped, well-formed or not (neither handler keeps them)
    "/trailer-ok": ([OK + CHUNKED + b"2\r\nok\r\n0\r\nX-T: 1\r\n\r\n"], {}, _ok([])),
    "/trailer-no-colon": (
        [OK + CHUNKED + b"2\r\nok\r\n0\r\nbad trailer line\r\n\r\n"],
        {},
        _ok([]),
    ),
    "/trailer-folded": ([OK + CHUNKED + b"2\r\nok\r\n0\r\nX-T: 1\r\n  more\r\n\r\n"], {}, _ok([])),
    "/trailer-no-colon-close": (
        [OK + CHUNKED + b"2\r\nok\r\n0\r\nbad\r\n\r\n", "close"],
        {},
        _ok([]),
    ),
    "/chunk-no-crlf": ([OK + CHUNKED + b"2\r\nokX\r\n0\r\n\r\n"], {}, DATALOSS),
}


def outcome(handler_name: str, path: str, web: RawWeb, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """What a download of ``path`` gives, in comparable form."""
    handler, _ = make_handler(handler_name)
    try:
        response = run(handler.download_request(Request(web.url(path), **kwargs)))
    except Exception as e:
        cause = e.__cause__
        return (type(e).__name__, type(cause).__name__ if cause else None, classify(e))
    finally:
        run(handler.close())
        settle()
    headers = [(k.decode(), list(vs)) for k, vs in response.headers.items()]
    return (type(response).__name__, response.status, headers, response.body, response.protocol)


@pytest.fixture(scope="module", autouse=True)
def _threads() -> Any:
    with plain_reactor():
        yield


@pytest.fixture(scope="module")
def web() -> Any:
    server = RawWeb({path: case[0] for path, case in CASES.items()})
    yield server
    server.stop()


@pytest.mark.parametrize("path", list(CASES))
def test_both_handlers_agree(web: RawWeb, path: str) -> None:
    _, kwargs, expected = CASES[path]
    assert outcome("scrapy", path, web, kwargs) == expected
    assert outcome("lean", path, web, kwargs) == expected


@pytest.mark.parametrize(
    "answer",
    [
        OK + b"X-C: a\x01b\r\nContent-Length: 2\r\n\r\nok",  # control byte: the lenient read
        b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF: the lenient read too
    ],
)
def test_a_lenient_read_keeps_the_connection_alive(answer: bytes) -> None:
    """An answer read the Twisted way is framed by llhttp: its keep-alive connection is reused
    (it was aborted: the clean parse's stop was taken for the first parse's error)."""
    server = RawWeb({"/a": [answer], "/b": [answer]})
    handler, _ = make_handler("lean")
    try:
        for path in ("/a", "/b"):
            response = run(handler.download_request(Request(server.url(path))))
            assert (response.status, response.body) == (200, b"ok")
    finally:
        run(handler.close())
        server.stop()
    assert server.connections == 1
