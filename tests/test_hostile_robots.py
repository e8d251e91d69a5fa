"""Robots meta, X-Robots-Tag, rel="nofollow" and canonical in the spider's items, and noindex pages
kept out of the storage pipelines (issue #14, item 8). In-process, real pipelines on tmp_path."""

from __future__ import annotations

import gzip

import pytest
from scrapy.utils.reactor import install_reactor, is_reactor_installed

if not is_reactor_installed():
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from scrapy.utils.test import get_crawler

from larbinscrapy.pipelines.mirrorsave import MirrorSavePipeline
from larbinscrapy.pipelines.simplesave import SimpleSavePipeline
from larbinscrapy.pipelines.warc import WarcPipeline
from larbinscrapy.spiders.larbin import LarbinSpider
from tests.support.spider import SETTINGS, parse

LINKS = b'<a href="/a">a</a><a href="/b" rel="nofollow">b</a><a href="/c">c</a>'


@pytest.mark.parametrize(
    ("head", "headers", "noindex", "links"),
    [
        (b"", {}, False, ["/a", "/c"]),
        (b'<meta name="robots" content="nofollow">', {}, False, []),
        (b'<meta name="robots" content="noindex">', {}, True, ["/a", "/c"]),
        (b'<meta name="robots" content="none">', {}, True, []),
        (b'<meta name="larbinscrapy" content="noindex, nofollow">', {}, True, []),  # our name
        (b'<meta name="otherbot" content="none">', {}, False, ["/a", "/c"]),
        (b"", {"X-Robots-Tag": "noindex"}, True, ["/a", "/c"]),
        (b"", {"X-Robots-Tag": "nofollow"}, False, []),
        (b"", {"X-Robots-Tag": "otherbot: none"}, False, ["/a", "/c"]),
        (b"", {"X-Robots-Tag": ["otherbot: noindex", "larbinscrapy: nofollow"]}, False, []),
    ],
)
def test_robots_directives_are_obeyed(head, headers, noindex, links):
    item, stats = parse(b"<head>" + head + b"</head>" + LINKS, headers)
    assert item["noindex"] is noindex
    assert item["links"] == ["http://h.test" + p for p in links]
    # every link not followed is counted: the rel=nofollow one, or all three
    assert stats.get_value("larbin/filtered/nofollow") == (1 if links else 3)


def test_obeying_can_be_turned_off():
    head = b'<head><meta name="robots" content="noindex, nofollow"></head>'
    item, stats = parse(
        head + LINKS,
        {"X-Robots-Tag": "none"},
        LARBIN_OBEY_NOFOLLOW=False,
        LARBIN_OBEY_NOINDEX=False,
    )
    assert item["noindex"] is False
    assert sorted(item["links"]) == ["http://h.test/a", "http://h.test/b", "http://h.test/c"]
    assert stats.get_value("larbin/filtered/nofollow") is None


def test_canonical_is_recorded():
    item, _ = parse(b'<head><link rel="canonical" href="/main.html"></head>')
    assert item["canonical"] == "http://h.test/main.html"
    item, _ = parse(b"<p>no canonical</p>")
    assert item["canonical"] is None


def test_noindex_pages_are_not_stored(tmp_path):
    crawler = get_crawler(LarbinSpider, SETTINGS)
    stats = crawler.stats
    pipelines = {
        "simplesave": SimpleSavePipeline(str(tmp_path / "simplesave"), stats=stats),
        "mirrorsave": MirrorSavePipeline(str(tmp_path / "mirrorsave"), stats=stats),
        "warc": WarcPipeline(str(tmp_path / "warc"), stats=stats),
    }
    kept, _ = parse(b"<p>index me</p>")
    hidden, _ = parse(b'<head><meta name="robots" content="noindex"></head><p>secret</p>')
    hidden["url"] = "http://h.test/secret.html"
    for name, pipeline in pipelines.items():
        pipeline.open_spider()
        assert pipeline.process_item(hidden) is hidden  # marked, passed on, not stored
        assert pipeline.process_item(kept) is kept
        getattr(pipeline, "close_spider", lambda: None)()
        assert stats.get_value(f"larbin/{name}/noindex") == 1
        files = [p.read_bytes() for p in (tmp_path / name).rglob("*") if p.is_file()]
        stored = b"".join(gzip.decompress(f) if f[:2] == b"\x1f\x8b" else f for f in files)
        assert b"index me" in stored
        assert b"secret" not in stored
