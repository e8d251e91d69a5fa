"""The hostile web's worst overlap, made deterministic: peak RSS stays under 300 MB (issue #14).

Six hosts (six loopback IPs, so politeness fetches them at once) each serve a home page of
~4.5 MB holding 120,000 links: just under ``DOWNLOAD_MAXSIZE``, the most one response may bring
in. All six arrive together and are parsed back to back, with the default per-site budget
(100,000), so nothing but the per-page bounds keeps their links from turning into
hundreds of thousands of ``Request`` objects at once. The crawl is stopped by
``CLOSESPIDER_TIMEOUT`` after the six pages are handled (their items in the feed prove it: a
page's item comes after all its requests). The peak RSS is the crawl process's own
(``os.wait4``), as in tests/test_hostile_web.py.

The servers are ``http.server`` threads of this test process, one per IP: real HTTP on loopback,
nothing hostile about the protocol here, only the size of the pages. Unit tests of the three
bounds (the per-page link cap, the gate's streaming, the parser's output freed before
``yield item``) come first.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from larbinscrapy.items import PageItem
from larbinscrapy.parse.links import Page
from larbinscrapy.spiders.larbin import LarbinSpider
from settings import base
from tests.support.crawl import ROOT, crawl_command
from tests.support.spider import SETTINGS, gate, page_response, parse
from testweb.harness import run_with_peak_rss

if TYPE_CHECKING:
    from collections.abc import Iterator

RSS_LIMIT_MB = 300
HOSTS = {f"big{i}.test": f"127.0.6.{i}" for i in range(1, 7)}
LINKS_PER_PAGE = 120_000
TIMEOUT = 180
RUN_FOR = 25  # CLOSESPIDER_TIMEOUT: long enough to parse the six pages on a loaded machine


def _anchors(n: int) -> bytes:
    return b"".join(b'<a href="/l/%d.html">x</a>' % i for i in range(n))


def test_a_page_keeps_its_first_links_up_to_the_cap_and_counts_the_rest():
    item, stats = parse(_anchors(8), LARBIN_LINKS_PER_PAGE_MAX=5)
    assert item["links"] == [f"http://h.test/l/{i}.html" for i in range(5)]
    assert stats.get_value("larbin/filtered/page_links") == 3
    item, stats = parse(_anchors(8), LARBIN_LINKS_PER_PAGE_MAX=0)  # 0: no cap
    assert len(item["links"]) == 8
    assert stats.get_value("larbin/filtered/page_links") is None


def test_parse_holds_no_parser_output_while_it_waits_at_yield_item():
    crawler = get_crawler(LarbinSpider, {**SETTINGS, "LARBIN_LINKS_PER_PAGE_MAX": 5})
    spider = LarbinSpider.from_crawler(crawler, urls="http://h.test/")
    url = "http://h.test/p.html"
    response = HtmlResponse(
        url, body=_anchors(50), request=Request(url), headers={"Content-Type": "text/html"}
    )
    parsing = spider.parse(response)
    item = next(parsing)
    held = parsing.gi_frame.f_locals.values()  # type: ignore[attr-defined]
    assert not [v for v in held if isinstance(v, Page)], "the whole parse result is still held"
    assert len(item["links"]) == 5


def test_the_gate_builds_one_request_at_a_time():
    middleware, _ = gate()
    taken = 0

    def links():
        nonlocal taken
        for i in range(1000):
            taken += 1
            yield f"http://h.test/l/{i}.html"

    item = PageItem(url=page_response().url, links=links())
    out = middleware.process_spider_output(page_response(), [item])
    first = next(out)
    assert first.url == "http://h.test/l/0.html"
    assert taken == 1, f"{taken} links were turned into Requests before the first was taken"
    rest = list(out)
    assert len(rest) == 1000  # 999 Requests, then the item
    assert rest[-1] is item


def _links_page(host: str) -> bytes:
    """Its own title per host: the content-duplicate pipeline would drop identical homes."""
    anchors = "".join(f'<a href="/l/{i}.html">{i}</a>\n' for i in range(LINKS_PER_PAGE))
    return f"<html><head><title>{host}</title></head><body>{anchors}</body></html>".encode()


class _Handler(BaseHTTPRequestHandler):
    home: bytes = b""

    def do_GET(self) -> None:
        body = self.home if self.path == "/" else b"<html><body>leaf</body></html>"
        self.send_response(200 if self.path != "/robots.txt" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the crawl's stats are what the test reads."""


@pytest.fixture
def big_web() -> Iterator[dict[str, int]]:
    """One HTTP server per host IP; yields {host: port}."""
    servers = {
        host: ThreadingHTTPServer((ip, 0), type("H", (_Handler,), {"home": _links_page(host)}))
        for host, ip in HOSTS.items()
    }
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers.values()]
    for thread in threads:
        thread.start()
    try:
        yield {host: s.server_address[1] for host, s in servers.items()}
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


@pytest.mark.crawl
def test_six_link_heavy_pages_at_once_stay_under_300_mb(big_web, tmp_path):
    assert len(_links_page("big1.test")) < base.DOWNLOAD_MAXSIZE  # each page is parsed, not dropped
    seeds = [f"http://{host}:{port}/" for host, port in big_web.items()]
    cmd = crawl_command(
        SimpleNamespace(resolve=HOSTS),
        tmp_path,
        "-a",
        "urls=" + ",".join(seeds),
        settings={
            "CONCURRENT_REQUESTS": 256,
            "CLOSESPIDER_TIMEOUT": RUN_FOR,
            "LARBIN_DOMAINS": "test",
        },
    )
    returncode, peak_mb = run_with_peak_rss(
        cmd, tmp_path / "crawl.log", TIMEOUT, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    log_text = (tmp_path / "crawl.log").read_text()
    assert returncode == 0, log_text[-3000:]
    assert "Traceback" not in log_text, log_text[log_text.find("Traceback") - 2000 :][:5000]
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    homes = {i["url"] for i in items} & set(seeds)
    assert homes == set(seeds), "the crawl closed before every big page was handled"
    print(f"peak RSS {peak_mb:.0f} MB")
    assert peak_mb < RSS_LIMIT_MB, f"peak RSS {peak_mb:.0f} MB"
    stats = json.loads((tmp_path / "stats.json").read_text())
    cap = base.LARBIN_LINKS_PER_PAGE_MAX
    assert stats["larbin/filtered/page_links"] == len(seeds) * (LINKS_PER_PAGE - cap)
    assert all(len(i["links"]) <= cap for i in items)
