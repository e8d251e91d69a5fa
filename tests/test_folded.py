"""The per-page Scrapy machinery we slimmed keeps what users see.

* Start and referer spider middlewares without their output layer (``middlewares/folded.py``):
  the spider-middleware output chain is the link gate alone, and the links the gate turns into
  requests carry the Referer that Scrapy's policies give (with redirects, a ``Referrer-Policy``
  response header, ``REFERER_ENABLED``, ``REFERRER_POLICY``), over real crawls of a
  header-recording server on loopback. With Scrapy's own ``RefererMiddleware`` they carried
  none: it sits inside the gate, which creates them after it ran.
* Start-up: a crawl imports neither aiohttp (the remote-control extension) nor tldextract
  (the cookies middleware) while both are off.
* ``QuietLogFormatter``: no "Crawled"/"Scraped" records below DEBUG, Scrapy's at DEBUG.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest
from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")  # no-op if installed

from scrapy import Request  # noqa: E402
from scrapy.core.spidermw import SpiderMiddlewareManager  # noqa: E402
from scrapy.http import HtmlResponse  # noqa: E402
from scrapy.spidermiddlewares.referer import RefererMiddleware  # noqa: E402
from scrapy.utils.misc import build_from_crawler  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402

from larbinscrapy.lean.logformatter import QuietLogFormatter, debug_enabled  # noqa: E402
from larbinscrapy.middlewares.gate import LinkGateMiddleware  # noqa: E402
from settings import base  # noqa: E402
from tests.support.crawl import ROOT  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

BASE_SETTINGS = {k: v for k, v in vars(base).items() if k.isupper()}

PAGES: dict[str, tuple[int, dict[str, str], str]] = {
    "/robots.txt": (200, {"Content-Type": "text/plain"}, "User-agent: *\nAllow: /\n"),
    "/": (200, {}, '<a href="/a.html">a</a> <a href="/r">r</a> <a href="/d.html">d</a>'),
    # the response's own policy: the page it links to gets no Referer
    "/a.html": (200, {"Referrer-Policy": "no-referrer"}, '<a href="/c.html">c</a>'),
    "/r": (302, {"Location": "/b.html"}, ""),
    "/b.html": (200, {}, "b"),
    "/c.html": (200, {}, "c"),
    "/d.html": (200, {}, '<a href="/">home</a> <a href="/e.html">e</a>'),
    "/e.html": (200, {}, "e"),
}


class _Recorder(BaseHTTPRequestHandler):
    """Answers PAGES and records every request's path and headers."""

    log: list[tuple[str, dict[str, str]]]

    def do_GET(self) -> None:
        self.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
        status, headers, body = PAGES.get(self.path, (404, {}, "not found"))
        data = f"<html><body>{body}</body></html>".encode() if status != 302 else b""
        self.send_response(status)
        self.send_header("Content-Type", headers.get("Content-Type", "text/html"))
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    log: list[tuple[str, dict[str, str]]] = []
    handler = type("Handler", (_Recorder,), {"log": log})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()


def _crawl(
    url: str, out: Path, settings: dict[str, Any] | None = None, python_flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        *python_flags,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        f"urls={url}/",
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        "DOWNLOAD_DELAY=0",
        "-s",
        "LOG_LEVEL=INFO",
        "-o",
        str(out / "items.jsonl"),
    ]
    for key, value in (settings or {}).items():
        cmd += ["-s", f"{key}={json.dumps(value) if isinstance(value, dict) else value}"]
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _sent(log: list[tuple[str, dict[str, str]]]) -> dict[str, tuple[str | None, str | None]]:
    """path -> (Referer, User-Agent) of what the server received; each path once."""
    paths = [p for p, _ in log]
    assert len(paths) == len(set(paths)), paths
    return {p: (h.get("referer"), h.get("user-agent")) for p, h in log}


@pytest.mark.crawl
def test_links_carry_the_referer_scrapys_policy_gives(recorder, tmp_path):
    url, log = recorder
    _crawl(url, tmp_path / "folded")
    folded = _sent(log)
    assert set(folded) - {"/sitemap.xml"} == set(PAGES)  # the sitemap reader may ask for it
    assert folded.get("/sitemap.xml", (None,))[0] is None
    assert folded["/a.html"][0] == f"{url}/"
    assert folded["/d.html"][0] == f"{url}/"
    assert folded["/e.html"][0] == f"{url}/d.html"
    assert folded["/b.html"][0] == f"{url}/r"  # the redirect's source, as Scrapy sets it
    assert folded["/c.html"][0] is None  # a.html said Referrer-Policy: no-referrer
    assert folded["/robots.txt"][0] is None and folded["/"][0] is None
    assert {ua for _, ua in folded.values()} == {base.USER_AGENT}


@pytest.mark.crawl
def test_referer_settings_still_apply(recorder, tmp_path):
    url, log = recorder
    _crawl(url, tmp_path / "off", {"REFERER_ENABLED": False})
    assert {ref for ref, _ in _sent(log).values()} == {None}
    log.clear()
    _crawl(url, tmp_path / "origin", {"REFERRER_POLICY": "origin"})
    sent = _sent(log)
    assert sent["/e.html"][0] == f"{url}/"  # the origin only, not /d.html


@pytest.mark.crawl
def test_no_aiohttp_or_tldextract_at_start_up(recorder, tmp_path):
    url, _ = recorder
    result = _crawl(url, tmp_path / "imports", python_flags=("-X", "importtime"))
    imported = {
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "scrapy.core.engine" in imported  # the flag worked
    assert not imported & {
        "aiohttp",
        "tldextract",
        "scrapy.extensions.remote_control",
        "scrapy.downloadermiddlewares.cookies",
    }


def test_cookies_still_work_when_enabled(tmp_path):
    crawler = get_crawler(settings_dict={**BASE_SETTINGS, "COOKIES_ENABLED": True})
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
    from scrapy.downloadermiddlewares.cookies import CookiesMiddleware

    manager = build_from_crawler(DownloaderMiddlewareManager, crawler)
    assert any(isinstance(mw, CookiesMiddleware) for mw in manager.middlewares)
    crawler = get_crawler(settings_dict=BASE_SETTINGS)
    manager = build_from_crawler(DownloaderMiddlewareManager, crawler)
    assert not any(type(mw).__name__ == "CookiesMiddleware" for mw in manager.middlewares)


def test_spider_output_chain_is_the_gate_alone():
    crawler = get_crawler(settings_dict=BASE_SETTINGS)
    manager = build_from_crawler(SpiderMiddlewareManager, crawler)
    layers = [m for m in manager.methods["process_spider_output"] if m is not None]
    assert [type(m.__self__) for m in layers] == [LinkGateMiddleware]
    # still there for redirects and for the gate, and still setting is_start_request
    assert any(isinstance(mw, RefererMiddleware) for mw in manager.middlewares)
    assert any(
        getattr(m, "__self__", None).__class__.__name__ == "StartOnlyMiddleware"
        for m in manager.methods["process_start"]
    )


@pytest.mark.parametrize(
    ("enabled", "level", "debug"),
    [
        (True, "DEBUG", True),
        (True, "debug", True),
        (True, 10, True),
        (True, "INFO", False),
        (True, "WARNING", False),
        (False, "DEBUG", False),
    ],
)
def test_debug_enabled(enabled, level, debug):
    assert debug_enabled(enabled, level) is debug


def test_debug_enabled_rejects_unknown_levels():
    with pytest.raises(ValueError, match="LOG_LEVEL"):
        debug_enabled(True, "LOUD")


def test_quiet_formatter_skips_per_page_records_below_debug():
    request = Request("http://h.test/")
    response = HtmlResponse("http://h.test/", body=b"<html></html>", request=request)
    assert QuietLogFormatter(debug=False).crawled(request, response, None) is None
    assert QuietLogFormatter(debug=False).scraped({"a": 1}, response, None) is None
    assert "Crawled" in QuietLogFormatter(debug=True).crawled(request, response, None)["msg"]
    assert "Scraped" in QuietLogFormatter(debug=True).scraped({"a": 1}, response, None)["msg"]
    crawler = get_crawler(settings_dict=BASE_SETTINGS)
    assert isinstance(crawler.logformatter, QuietLogFormatter)


# --- DownloaderStatsMiddleware: Scrapy's downloader/* stats, same values --------------------
STATS_REQUESTS = [
    Request(
        "http://127.0.2.3:4567/s3/page45.html",
        headers={"Referer": "http://127.0.2.3:4567/s2/", "User-Agent": "larbin"},
    ),
    Request("http://h.test/"),
    Request(
        "https://h.test:8443/a;p?q=1&r=%20",
        method="POST",
        body=b"abc",
        headers={"X-Many": ["1", "2"], "Accept": "*/*"},
    ),
    Request("http://bücher.example/ä?ö=1"),
    Request("http://h.test/a?", headers={"Empty": ""}),
    Request("http://h.test/a;", method="HEAD"),
]


@pytest.mark.parametrize("request_", STATS_REQUESTS, ids=lambda r: r.url)
def test_request_size_is_len_of_request_httprepr(request_):
    from scrapy.utils.request import request_httprepr

    from larbinscrapy.lean.folded import request_size

    assert request_size(request_) == len(request_httprepr(request_))


def test_downloader_stats_equal_scrapys():
    from scrapy.downloadermiddlewares.stats import DownloaderStats
    from twisted.internet.error import ConnectionRefusedError

    from larbinscrapy.lean.folded import DownloaderStatsMiddleware

    theirs_crawler, ours_crawler = get_crawler(), get_crawler()
    theirs = build_from_crawler(DownloaderStats, theirs_crawler)
    ours = build_from_crawler(DownloaderStatsMiddleware, ours_crawler)
    for i, request in enumerate(STATS_REQUESTS):
        response = HtmlResponse(
            request.url,
            status=(200, 404, 301, 599)[i % 4],
            body=b"x" * (i * 1000),
            request=request,
            headers={"Server": "nginx", "Set-Cookie": ["a=1", "b=2"]} if i % 2 else {},
        )
        for mw in (theirs, ours):
            mw.process_request(request)
            assert mw.process_response(request, response) is response
            mw.process_exception(request, ConnectionRefusedError())
    assert ours_crawler.stats.get_stats() == theirs_crawler.stats.get_stats()
    assert ours_crawler.stats.get_value("downloader/request_count") == len(STATS_REQUESTS)


# --- LeanStatsCollector ---------------------------------------------------------------------
def test_lean_stats_collector_behaves_as_scrapys_without_the_wrapper():
    from scrapy.statscollectors import MemoryStatsCollector

    from larbinscrapy.lean.stats import LeanStatsCollector

    crawler = get_crawler(settings_dict=BASE_SETTINGS)
    assert isinstance(crawler.stats, LeanStatsCollector)
    # the bound method itself: no per-call deprecation wrapper in between
    assert crawler.stats.inc_value.__func__ is MemoryStatsCollector.inc_value
    ours, theirs = LeanStatsCollector(crawler), MemoryStatsCollector(get_crawler())
    for stats in (ours, theirs):
        stats.inc_value("a")
        stats.inc_value("a", 2)
        stats.inc_value("b", start=10)
        stats.set_value("c", "x")
        stats.max_value("m", 3)
        stats.max_value("m", 1)
        stats.min_value("n", 3)
        stats.min_value("n", 1)
    assert ours.get_stats() == theirs.get_stats() == {"a": 3, "b": 11, "c": "x", "m": 3, "n": 1}
    assert ours.get_value("missing", 5) == 5
