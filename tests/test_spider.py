"""The ``larbin`` spider in-process: its arguments, and the item ``parse`` builds from a response.

Runs under pytest's ``filterwarnings`` (pyproject.toml): a ScrapyDeprecationWarning is an error.
"""

from __future__ import annotations

import itertools
import warnings
from datetime import datetime

import pytest
from scrapy import Request
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.http import HtmlResponse, TextResponse
from scrapy.utils.test import get_crawler

from larbinscrapy.items import PageItem
from larbinscrapy.seeds.seedlist import SeedsError
from larbinscrapy.spiders.larbin import LarbinSpider, SpiderArgumentError
from settings import base

SETTINGS = {k: v for k, v in vars(base).items() if k.isupper()}
PAGE = b"""<html><head><title> A  page </title>
<meta name="keywords" content="k1, k2"><meta name="description" content="About it.">
</head><body><a href="/a.html#x">a</a> <a href="http://other.test/">o</a>
<img src="/i.webp"> <a href="mailto:x@y">m</a></body></html>"""


def spider(**kwargs) -> LarbinSpider:
    kwargs.setdefault("urls", "http://h.test/")
    return LarbinSpider.from_crawler(get_crawler(LarbinSpider, SETTINGS), **kwargs)


def response(
    url="http://h.test/dir/page.html", body=PAGE, cls=HtmlResponse, **meta
) -> HtmlResponse:
    headers = {
        "Content-Type": "text/html; charset=utf-8",
        "Server": "testweb",
        "X-Multi": ["one", "two"],
    }
    request = Request(url, meta={"depth": 2, "larbin_ip": "127.0.1.1", **meta})
    return cls(url, status=200, headers=headers, body=body, request=request)


def test_deprecation_warnings_are_errors_here():
    # pyproject.toml's filterwarnings: so every test of this file fails on a Scrapy deprecation.
    with pytest.raises(ScrapyDeprecationWarning):
        warnings.warn("a deprecated call", ScrapyDeprecationWarning, stacklevel=1)


def test_parse_builds_one_page_item():
    (item,) = list(spider().parse(response(larbin_referer="http://h.test/")))
    assert isinstance(item, PageItem)
    assert item["url"] == "http://h.test/dir/page.html"
    assert item["status"] == 200
    assert item["depth"] == 2
    assert item["referer"] == "http://h.test/"
    assert item["ip"] == "127.0.1.1"
    assert item["content_type"] == "text/html"
    assert item["length"] == len(PAGE) and item["body"] == PAGE
    assert (item["title"], item["keywords"], item["description"]) == (
        "A page",
        "k1, k2",
        "About it.",
    )
    assert item["links"] == ["http://h.test/a.html", "http://other.test/"]
    assert datetime.fromisoformat(item["fetched_at"]).tzinfo is not None


def test_headers_are_a_str_dict_for_the_warc_pipeline():
    (item,) = list(spider().parse(response()))
    headers = item["headers"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Server"] == "testweb"
    assert headers["X-Multi"] == "one, two"


def test_images_argument_adds_img_src():
    (item,) = list(spider(images="true").parse(response()))
    assert item["links"] == ["http://h.test/a.html", "http://other.test/", "http://h.test/i.webp"]


def test_non_html_pages_have_no_links_or_meta():
    text = b"http://h.test/not-a-link.html <title>no</title>"
    resp = TextResponse(
        "http://h.test/notes.txt",
        headers={"Content-Type": "text/plain"},
        body=text,
        request=Request("http://h.test/notes.txt"),
    )
    (item,) = list(spider().parse(resp))
    assert item["content_type"] == "text/plain"
    assert item["links"] == [] and item["title"] is None
    assert item["referer"] is None and item["depth"] == 0


@pytest.mark.parametrize(
    ("kwargs", "attr", "expected"),
    [
        ({"depth": "3"}, "max_depth", 3),
        ({"depth": "-1"}, "max_depth", None),  # negative: no limit
        ({"external": "false"}, "external", False),
        ({"external": "NO"}, "external", False),
        ({"external": "1"}, "external", True),
        ({"domains": "A.test, .b.test"}, "domains", ("a.test", "b.test")),
        ({}, "max_depth", 5),  # LARBIN_DEPTH
        ({}, "external", True),  # LARBIN_EXTERNAL
    ],
)
def test_arguments_set_the_filters(kwargs, attr, expected):
    assert getattr(spider(**kwargs).url_filter, attr) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": "two"}, "-a depth= takes an integer, got 'two'"),
        ({"external": "maybe"}, "-a external= takes true or false, got 'maybe'"),
        ({"images": "2"}, "-a images= takes true or false, got '2'"),
    ],
)
def test_bad_arguments_raise_a_clear_error(kwargs, message):
    with pytest.raises(SpiderArgumentError, match=message):
        spider(**kwargs)


def test_seed_errors_raise_in_process(tmp_path):
    with pytest.raises(SeedsError, match="no valid seed URL in -a urls"):
        spider(urls="ftp://x/")
    with pytest.raises(SeedsError, match="-a seeds=FILE or -a urls=URL,URL"):
        spider(urls="")
    with pytest.raises(SeedsError, match=str(tmp_path / "none.txt")):
        spider(urls=None, seeds=str(tmp_path / "none.txt"))


def test_seeds_file_and_url_list_are_merged(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_text("http://a.test/\nbad\nhttp://b.test/\n")
    s = spider(seeds=str(path), urls="http://b.test/,http://c.test/")
    assert s.seed_urls == ["http://a.test/", "http://b.test/", "http://c.test/"]
    assert s.seed_errors == 1


def test_seeds_are_let_go_once_handed_to_the_engine(tmp_path):
    """A broad crawl's seeds list can hold millions of URLs: once each is queued (the frontier
    keeps it on disk) the spider no longer holds it, for the rest of the crawl."""
    import asyncio
    import gc
    import tracemalloc

    def handed_over(count: int) -> LarbinSpider:
        path = tmp_path / f"seeds-{count}.txt"
        path.write_text("".join(f"http://host{n}.example.test/\n" for n in range(count)))
        s = spider(seeds=str(path), urls=None)

        async def hand_over() -> int:
            return sum([1 async for _ in s.start()])

        loop = asyncio.new_event_loop()  # not asyncio.run: it unsets the thread's loop
        try:
            assert loop.run_until_complete(hand_over()) == count
        finally:
            loop.close()
        return s

    handed_over(10)  # what the first spider loads once (imports, MIME types)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        s = handed_over(20_000)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert s.crawler.stats.get_value("larbin/seeds/valid") == 20_000
    assert held / 20_000 < 20, f"{held / 20_000:.0f} bytes a seed still held"


def test_the_reactor_runs_between_seeds_while_they_are_queued(tmp_path):
    """Scrapy's engine reads ``start()`` without a pause while its downloader is full, and
    queueing a seed never waits: a million seeds held the reactor for 41 s, so DNS answers
    were dropped at the socket and every download in flight timed out at once (RESULTS.md).
    The reactor gets a turn every ``SEEDS_A_TURN`` seeds (here: other work meanwhile runs)."""
    import asyncio

    from larbinscrapy.spiders.larbin import SEEDS_A_TURN

    count = 20 * SEEDS_A_TURN
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"http://host{n}.example.test/\n" for n in range(count)))
    s = spider(seeds=str(path), urls=None)
    queued = 0
    turns: list[int] = []  # the seeds queued when each turn of the loop came

    async def read_all() -> None:
        nonlocal queued
        async for _ in s.start():
            queued += 1

    async def ticker() -> None:
        while queued < count:
            turns.append(queued)
            await asyncio.sleep(0)

    async def both() -> None:
        await asyncio.gather(read_all(), ticker())

    loop = asyncio.new_event_loop()  # not asyncio.run: it unsets the thread's loop
    try:
        loop.run_until_complete(both())
    finally:
        loop.close()
    assert queued == count
    gaps = [b - a for a, b in itertools.pairwise(turns)]
    assert len(turns) >= count // SEEDS_A_TURN - 1  # the first turn comes after the first seeds
    assert max(gaps) <= SEEDS_A_TURN
