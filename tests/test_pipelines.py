"""The item pipelines driven with PageItems and a real crawler: content duplicates (and their
journal across a crash), simple save, mirror save (hostile URL tables), WARC (checked by warcio
itself) and the SQLite example of docs/pipelines.md across a resumed crawl."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import scrapy
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.test import get_crawler
from warcio.archiveiterator import ArchiveIterator

from larbinscrapy.items import PageItem
from larbinscrapy.pipelines import contentdup, mirrorsave, sqlite_example
from larbinscrapy.pipelines.contentdup import ContentDupPipeline, SimhashIndex
from larbinscrapy.pipelines.mirrorsave import MirrorSavePipeline, mirror_path
from larbinscrapy.pipelines.simplesave import SimpleSavePipeline
from larbinscrapy.pipelines.sqlite_example import SQLitePipeline
from larbinscrapy.pipelines.warc import WarcPipeline
from settings import base
from tests.support.crawl import LARBIN_DEFAULTS
from tests.support.wait import run_loop, wait_for

REPO = Path(__file__).resolve().parent.parent


class HeaderItem(PageItem):
    """A PageItem with the ``headers`` field the lead is adding to items.py."""

    headers = scrapy.Field()


def page(
    url: str, body: bytes | None, item_class: type[PageItem] = PageItem, **fields: Any
) -> PageItem:
    item = item_class(
        url=url,
        status=200,
        depth=0,
        referer=None,
        fetched_at="2024-05-01T12:00:00.250000+00:00",
        content_type="text/html",
        length=len(body) if body is not None else None,
        title=f"title of {url}",
        ip="127.0.1.1",
        body=body,
    )
    item.update(fields)
    return item


def crawler(**settings: Any):
    return get_crawler(settings_dict={**LARBIN_DEFAULTS, **settings})


def run(pipelines: list[Any], items: list[PageItem]) -> tuple[list[PageItem], list[str]]:
    """Pass items through the pipelines in order, as Scrapy does; return (kept, drop reasons)."""
    kept, dropped = [], []
    for item in items:
        out = item
        try:
            for p in pipelines:
                out = p.process_item(out)
        except DropItem as exc:
            dropped.append(str(exc))
        else:
            kept.append(out)
    return kept, dropped


def words(seed: int, n: int = 120) -> bytes:
    """Deterministic text of n distinct-looking words."""
    return b" ".join(b"w%d" % ((i * 7919 + seed * 104729) % 100003) for i in range(n))


def html(text: bytes) -> bytes:
    return b"<html><head><title>t</title><style>p{}</style></head><body><p>" + text + b"</p>"


# --- content duplicates ----------------------------------------------------------------------


def test_contentdup_is_on_by_default_and_one_setting_turns_it_off():
    assert base.ITEM_PIPELINES["larbinscrapy.pipelines.contentdup.ContentDupPipeline"] == 100
    assert ContentDupPipeline.from_crawler(crawler()).near is None  # simhash off by default
    with pytest.raises(NotConfigured):
        ContentDupPipeline.from_crawler(crawler(LARBIN_CONTENT_DUP=False))


def test_identical_bodies_under_three_urls_are_stored_once(tmp_path):
    c = crawler(LARBIN_SIMPLE_SAVE=True, LARBIN_SIMPLE_SAVE_DIR=str(tmp_path / "save"))
    dup = ContentDupPipeline.from_crawler(c)
    save = SimpleSavePipeline.from_crawler(c)
    same = html(words(1))
    items = [
        page("http://a.test/", same),
        page("http://b.test/", html(words(2))),
        page("http://a.test/copy", same),
        page("http://c.test/mirror", same),
        page("http://c.test/other", html(words(3))),
    ]
    dup.open_spider()
    save.open_spider()
    kept, dropped = run([dup, save], items)
    save.close_spider()
    dup.close_spider()

    assert [i["url"] for i in kept] == ["http://a.test/", "http://b.test/", "http://c.test/other"]
    assert dropped == ["duplicate content of http://a.test/"] * 2
    assert c.stats.get_value("larbin/contentdup/dropped") == 2
    assert c.stats.get_value("larbin/contentdup/unique") == 3
    stored = [p.read_bytes() for p in (tmp_path / "save").glob("d*/f*")]
    assert len(stored) == 3 and stored.count(same) == 1


def test_contentdup_off_lets_every_copy_through(tmp_path):
    # the same crawl without the pipeline stores all three copies: the test above can fail
    save = SimpleSavePipeline(str(tmp_path / "save"))
    save.open_spider()
    same = html(words(1))
    run([save], [page(f"http://a.test/{i}", same) for i in range(3)])
    save.close_spider()
    assert len(list((tmp_path / "save").glob("d*/f*"))) == 3


@pytest.mark.parametrize(
    ("a", "b", "duplicate"),
    [
        (b"<p>Hello  world</p>\r\n", b"<p>Hello world</p>\n", True),  # whitespace only
        (b"  <p>x</p>", b"<p>x</p>\t\n", True),
        (b"<p>Hello world</p>", b"<p>hello world</p>", False),  # case is content
        (b"<p>page 1</p>", b"<p>page 2</p>", False),  # digits are content (larbin merged these)
        (b"<p>ab</p>", b"<p>a b</p>", True),  # whitespace is removed (larbin: letters only)
        (b"<p>a\x00b</p>", b"<p>ab</p>", False),  # only whitespace
    ],
)
def test_content_hash_normalises_whitespace_only(a, b, duplicate):
    assert (contentdup.content_hash(a) == contentdup.content_hash(b)) is duplicate


def test_empty_bodies_are_not_duplicates_of_each_other():
    c = crawler()
    dup = ContentDupPipeline.from_crawler(c)
    dup.open_spider()
    kept, _ = run([dup], [page(f"http://a.test/r{i}", b" \r\n" if i else b"") for i in range(3)])
    dup.close_spider()
    assert len(kept) == 3
    assert c.stats.get_value("larbin/contentdup/empty") == 3


def test_contentdup_journal_survives_a_crash(tmp_path):
    jobdir = tmp_path / "job"
    first = ContentDupPipeline.from_crawler(crawler(JOBDIR=str(jobdir)))
    first.open_spider()
    bodies = [html(words(i)) for i in range(20)]
    kept, _ = run([first], [page(f"http://a.test/{i}", b) for i, b in enumerate(bodies)])
    assert len(kept) == 20
    first.flush()
    # the process dies here: no close_spider. Copy what the OS has, plus half a record
    crashed = tmp_path / "crashed"
    shutil.copytree(jobdir, crashed)
    journal = crashed / "contentdup" / "journal"
    with open(journal, "ab") as f:
        f.write(contentdup._HEADER.pack(b"\x01" * 16, 0, 40) + b"http://torn")
    size_before_torn = journal.stat().st_size - contentdup._HEADER.size - len(b"http://torn")

    c = crawler(JOBDIR=str(crashed))
    second = ContentDupPipeline.from_crawler(c)
    second.open_spider()
    assert c.stats.get_value("larbin/contentdup/replayed") == 20
    assert journal.stat().st_size == size_before_torn  # the torn record was cut
    kept, dropped = run(
        [second], [page("http://b.test/x", bodies[7]), page("http://b.test/new", b"new")]
    )
    assert [i["url"] for i in kept] == ["http://b.test/new"]
    assert dropped == ["duplicate content of http://a.test/7"]
    second.close_spider()
    first.close_spider()

    third = ContentDupPipeline(str(crashed / "contentdup"))  # the journal is still well formed
    third.open_spider()
    _, dropped = run([third], [page("http://c.test/", b"new"), page("http://c.test/0", bodies[0])])
    third.close_spider()
    assert dropped == [
        "duplicate content of http://b.test/new",
        "duplicate content of http://a.test/0",
    ]


def test_contentdup_journal_is_flushed_by_its_timer(tmp_path):
    dup = ContentDupPipeline(str(tmp_path), flush_interval=0.1)
    dup.open_spider()
    run([dup], [page("http://a.test/", b"<p>kept</p>")])
    journal = tmp_path / "journal"
    assert journal.stat().st_size == 0  # still in the buffer
    # handed to the OS without close or an explicit flush
    wait_for(lambda: journal.stat().st_size > 0, 5, "the timer's flush", pause=run_loop)
    dup.close_spider()


def test_near_duplicates_are_dropped_only_when_enabled():
    text = words(5, 200)
    edited = text.replace(b"w%d" % ((50 * 7919 + 5 * 104729) % 100003), b"changed", 1)
    assert edited != text
    items = [
        page("http://a.test/", html(text)),
        page("http://a.test/edited", html(edited)),
        page("http://a.test/unrelated", html(words(6, 200))),
    ]
    off = ContentDupPipeline()
    off.open_spider()
    assert len(run([off], items)[0]) == 3
    off.close_spider()

    c = crawler(LARBIN_CONTENT_DUP_NEAR_DISTANCE=3)
    on = ContentDupPipeline.from_crawler(c)
    on.open_spider()
    kept, dropped = run([on], items)
    on.close_spider()
    assert [i["url"] for i in kept] == ["http://a.test/", "http://a.test/unrelated"]
    assert len(dropped) == 1 and dropped[0].startswith("near-duplicate content of http://a.test/ (")
    assert c.stats.get_value("larbin/contentdup/near_dropped") == 1


def test_simhash_ignores_markup_and_short_texts():
    assert contentdup.simhash(b"<p>two words</p>") == 0
    text = words(9, 100)
    other_markup = b"<title>t</title><script>var w1 = 2;</script><div class=x>" + text + b"</div>"
    assert contentdup.simhash(html(text)) == contentdup.simhash(other_markup)


@pytest.mark.parametrize("distance", [1, 3, 6])
def test_simhash_index_finds_exactly_the_hashes_within_distance(distance):
    index = SimhashIndex(distance)
    base_hash = 0x0123_4567_89AB_CDEF
    index.add(base_hash, 42)
    spread = [0, 9, 18, 27, 36, 45, 54, 63]  # flipped bits land in different blocks
    for flips in range(distance + 3):
        probe = base_hash
        for bit in spread[:flips]:
            probe ^= 1 << bit
        found = index.find(probe)
        if flips <= distance:
            assert found == (42, flips)
        else:
            assert found is None
    with pytest.raises(ValueError, match=r"must be in 1\.\.31"):
        SimhashIndex(32)


# --- simple save -----------------------------------------------------------------------------


def test_simplesave_is_off_by_default():
    with pytest.raises(NotConfigured):
        SimpleSavePipeline.from_crawler(crawler())


def read_index(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "index.jsonl").read_text().splitlines()]


def test_simplesave_index_and_files_agree_across_a_resume(tmp_path):
    root = tmp_path / "save"
    c = crawler(
        LARBIN_SIMPLE_SAVE=True,
        LARBIN_SIMPLE_SAVE_DIR=str(root),
        LARBIN_SIMPLE_SAVE_FILES_PER_DIR=3,
    )
    items = [
        page(f"http://a.test/{i}", b"body %d \x00\xff" % i, status=200 + i, content_type=f"t/{i}")
        for i in range(11)
    ]
    save = SimpleSavePipeline.from_crawler(c)
    save.open_spider()
    run([save], items[:7])
    save.close_spider()
    with open(root / "index.jsonl", "ab") as f:
        f.write(b'{"file": "d00009/f99999", "url": "http://torn')  # killed mid-line
    again = SimpleSavePipeline.from_crawler(c)
    again.open_spider()
    run([again], [*items[7:], page("http://a.test/nobody", None)])
    again.close_spider()

    index = read_index(root)
    assert [e["file"] for e in index] == [f"d{i // 3:05d}/f{i:05d}" for i in range(11)]
    for entry, item in zip(index, items, strict=True):
        assert (root / entry["file"]).read_bytes() == item["body"]
        assert (entry["url"], entry["status"], entry["content_type"]) == (
            item["url"],
            item["status"],
            item["content_type"],
        )
    on_disk = {str(p.relative_to(root)) for p in root.glob("d*/*")}
    assert on_disk == {e["file"] for e in index}
    assert all(len(list(d.iterdir())) <= 3 for d in root.glob("d*"))
    assert c.stats.get_value("larbin/simplesave/saved") == 11
    assert c.stats.get_value("larbin/simplesave/nobody") == 1


# --- mirror save -----------------------------------------------------------------------------

MAPPINGS = [
    ("http://a.test", "a.test/index.html"),
    ("http://a.test/", "a.test/index.html"),
    ("http://A.Test:80/x/y.html#frag", "a.test/x/y.html"),
    ("https://a.test:443/x/", "a.test/x/index.html"),
    ("http://a.test:8080/x", "a.test_8080/x"),
    ("http://a.test/x?b=1&c=%26", "a.test/x@q=b=1&c=%2526"),
    ("http://a.test/dir/?q", "a.test/dir/index.html@q=q"),
    ("http://a.test/a%2Fb", "a.test/a%2Fb"),
    ("http://a.test/%41%7e", "a.test/A~"),
    ("http://a.test/x@q=1", "a.test/x%40q=1"),  # cannot collide with x?1
    ("http://a.test/a/./b/../c", "a.test/a/c"),
    ("http://a.test/a//b", "a.test/a/b"),
    ("http://a.test/caf%C3%A9 x", "a.test/caf%C3%A9%20x"),
    ("http://127.0.1.1:8000/", "127.0.1.1_8000/index.html"),
    ("http://[::1]:81/x", "%3A%3A1_81/x"),
]


@pytest.mark.parametrize(("url", "expected"), MAPPINGS)
def test_mirror_path_mapping(url, expected):
    assert mirror_path(url) == expected


HOSTILE = [
    "http://a.test/../../../../etc/passwd",
    "http://a.test/%2e%2e/%2E%2E/%2e%2e/etc/passwd",
    "http://a.test/..%2F..%2F..%2Fetc%2Fpasswd",
    "http://a.test/%2e%2e%2f%2e%2e%2fetc",
    "http://a.test/..\\..\\..\\windows\\win.ini",
    "http://a.test/%5c..%5c..%5cboot.ini",
    "http://a.test//etc/passwd",
    "http://a.test/C:/Windows/system32",
    "http://a.test/x%00.html",
    "http://a.test/nul\x00byte",
    "http://a.test/.",
    "http://a.test/..",
    "http://a.test/...",
    "http://a.test/.../....",
    "http://a.test/.hidden/../..//../x",
    "http://../etc/passwd",
    "http://%2e%2e/x",
    "http://a.test:8080/%2e%2e/%2e%2e",
    "http://a.test/" + "a" * 5000,
    "http://a.test/" + "%2e" * 300,
    "http://a.test/" + "b/" * 600 + "c",
    "http://a.test/" + "%ff" * 300 + "?" + "q" * 400,
    "http://a.test/x?../../../etc/passwd",
    "http://a.test/x?%2e%2e/%2e%2e",
    "http://a.test/%c0%ae%c0%ae/%c0%ae%c0%ae/etc",
    "http://a.test/\u2025/\uff0e\uff0e/x",
    "http://" + "h" * 300 + ".test/x",
    "http://user:pw@a.test/../x",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_mirror_path_never_leaves_the_root(url, tmp_path):
    root = os.path.realpath(tmp_path)
    relative = mirror_path(url)
    names = relative.split("/")
    assert not any(n in ("", ".", "..") for n in names)
    assert all(len(n.encode()) <= mirrorsave.MAX_NAME for n in names)
    assert relative.isascii() and "\\" not in relative and "\x00" not in relative
    assert os.path.realpath(os.path.join(root, relative)).startswith(root + os.sep)


def test_mirror_pipeline_writes_hostile_urls_inside_its_directory(tmp_path):
    outer = tmp_path / "outer"
    root = outer / "mirror"
    c = crawler(LARBIN_MIRROR_SAVE=True, LARBIN_MIRROR_DIR=str(root))
    mirror = MirrorSavePipeline.from_crawler(c)
    mirror.open_spider()
    items = [page(url, b"hostile %d" % i) for i, url in enumerate(HOSTILE)]
    kept, _ = run([mirror], items)
    assert len(kept) == len(HOSTILE)  # storage never drops
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outer"]
    assert sorted(p.name for p in outer.iterdir()) == ["mirror"]
    real_root = os.path.realpath(root) + os.sep
    files = [Path(d, f) for d, _, fs in os.walk(root) for f in fs]
    assert files and all(os.path.realpath(f).startswith(real_root) for f in files)
    assert c.stats.get_value("larbin/mirrorsave/saved") == len(HOSTILE)


def test_mirror_pipeline_turns_a_file_into_a_directory_when_needed(tmp_path):
    mirror = MirrorSavePipeline(str(tmp_path))
    mirror.open_spider()
    run([mirror], [page("http://a.test/a", b"A"), page("http://a.test/a/b", b"B")])
    assert (tmp_path / "a.test/a/index.html").read_bytes() == b"A"
    assert (tmp_path / "a.test/a/b").read_bytes() == b"B"
    run([mirror], [page("http://a.test/a", b"A2")])
    assert (tmp_path / "a.test/a/index.html").read_bytes() == b"A2"


def test_mirror_pipeline_refuses_a_planted_symlink_and_unmappable_urls(tmp_path):
    root, outside = tmp_path / "mirror", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "evil.test").symlink_to(outside)
    c = crawler(LARBIN_MIRROR_SAVE=True, LARBIN_MIRROR_DIR=str(root))
    mirror = MirrorSavePipeline.from_crawler(c)
    mirror.open_spider()
    items = [
        page("http://evil.test/x", b"x"),
        page("http://evil.test/d/y", b"y"),
        page("ftp://a.test/x", b"x"),
        page("http:///x", b"x"),
        page("http://a.test:99999/x", b"x"),
    ]
    kept, _ = run([mirror], items)
    assert len(kept) == len(items)
    assert list(outside.iterdir()) == []
    assert c.stats.get_value("larbin/mirrorsave/refused") == 2
    assert c.stats.get_value("larbin/mirrorsave/unmappable") == 3
    with pytest.raises(NotConfigured):
        MirrorSavePipeline.from_crawler(crawler())


# --- WARC ------------------------------------------------------------------------------------


def warcio_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_warc_files_pass_warcio_and_hold_one_response_per_page(tmp_path):
    c = crawler(LARBIN_WARC=True, LARBIN_WARC_DIR=str(tmp_path), LARBIN_WARC_SIZE_MAX=4000)
    warc = WarcPipeline.from_crawler(c)
    warc.open_spider()
    items = [page(f"http://a.test/p{i}?x={i}", html(words(i, 300))) for i in range(5)]
    items.append(page("http://b.test:8080/bin", bytes(range(256)) * 4, content_type="image/png"))
    items.append(
        page(
            "http://b.test/h",
            b"<p>decoded</p>",
            item_class=HeaderItem,
            status=404,
            headers={
                "Content-Type": "text/html; charset=utf-8",
                "Content-Encoding": "gzip",
                "Transfer-Encoding": "chunked",
                "Content-Length": "9999",
                "X-Test": "kept",
                "X-Split": "a\r\nInjected: 1",
            },
        )
    )
    kept, _ = run([warc], [*items, page("http://a.test/nobody", None)])
    warc.close_spider()
    assert len(kept) == len(items) + 1

    files = sorted(tmp_path.glob("larbin-*.warc.gz"))
    assert files == sorted(warc.files) and len(files) > 1  # rotated by size
    check = warcio_cli("check", "-v", *map(str, files))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest pass" in check.stdout
    index = warcio_cli("index", "-f", "warc-type,warc-target-uri", *map(str, files))
    assert index.returncode == 0, index.stderr
    entries = [json.loads(line) for line in index.stdout.splitlines()]
    responses = [e["warc-target-uri"] for e in entries if e["warc-type"] == "response"]
    assert sorted(responses) == sorted(i["url"] for i in items)

    records: dict[str, dict[str, Any]] = {}
    response_ids = {}
    for path in files:
        with open(path, "rb") as f:
            types = []
            for record in ArchiveIterator(f):
                types.append(record.rec_type)
                uri = record.rec_headers.get_header("WARC-Target-URI")
                if record.rec_type == "response":
                    response_ids[uri] = record.rec_headers.get_header("WARC-Record-ID")
                    records[uri] = {
                        "body": record.content_stream().read(),
                        "status": record.http_headers.get_statuscode(),
                        "headers": dict(record.http_headers.headers),
                        "date": record.rec_headers.get_header("WARC-Date"),
                        "ip": record.rec_headers.get_header("WARC-IP-Address"),
                    }
                elif record.rec_type == "request":
                    concurrent = record.rec_headers.get_header("WARC-Concurrent-To")
                    assert concurrent == response_ids[uri]
                    assert record.http_headers.protocol == "GET"
            assert types[0] == "warcinfo" and types.count("warcinfo") == 1
            assert types[1:] == ["response", "request"] * ((len(types) - 1) // 2)
    for item in items:
        rec = records[item["url"]]
        assert rec["body"] == item["body"]
        assert rec["headers"]["Content-Length"] == str(len(item["body"]))
        assert rec["date"] == "2024-05-01T12:00:00.250000Z"
        assert rec["ip"] == "127.0.1.1"
    assert records["http://b.test:8080/bin"]["headers"]["Content-Type"] == "image/png"
    with_headers = records["http://b.test/h"]
    assert with_headers["status"] == "404"
    assert with_headers["headers"]["X-Test"] == "kept"
    assert "Content-Encoding" not in with_headers["headers"]
    assert "Transfer-Encoding" not in with_headers["headers"]
    assert "Injected" not in with_headers["headers"]
    assert c.stats.get_value("larbin/warc/written") == len(items)
    assert c.stats.get_value("larbin/warc/files") == len(files)
    assert c.stats.get_value("larbin/warc/nobody") == 1


def test_warc_is_off_by_default_and_a_resume_never_overwrites(tmp_path):
    with pytest.raises(NotConfigured):
        WarcPipeline.from_crawler(crawler())
    written = []
    for run_number in range(2):
        warc = WarcPipeline(str(tmp_path))
        warc.open_spider()
        run([warc], [page(f"http://a.test/{run_number}", b"x")])
        warc.close_spider()
        written += warc.files
    assert len(set(written)) == 2 and all(p.exists() for p in written)


# --- the SQLite example of docs/pipelines.md -------------------------------------------------


def test_docs_show_the_example_that_is_tested():
    doc = (REPO / "docs" / "pipelines.md").read_text()
    code = Path(sqlite_example.__file__).read_text()
    assert code.strip() in doc
    orders = dict(re.findall(r"\"(larbinscrapy\.pipelines\.[\w.]+)\": (\d+)", doc))
    assert orders["larbinscrapy.pipelines.contentdup.ContentDupPipeline"] == "100"


def test_sqlite_example_stores_every_page_once_across_a_resume(tmp_path):
    db = tmp_path / "pages.db"
    c = crawler(LARBIN_SQLITE_PATH=str(db), LARBIN_SQLITE_BATCH=3)
    items = [page(f"http://a.test/{i}", b"body %d" % i) for i in range(10)]
    first = SQLitePipeline.from_crawler(c)
    first.open_spider()
    run([first], items[:7])
    first.close_spider()
    # the resumed crawl delivers some pages again, then new ones
    resumed = SQLitePipeline.from_crawler(c)
    resumed.open_spider()
    run([resumed], items[4:])
    resumed.close_spider()

    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT url, status, title, fetched_at, body FROM pages").fetchall()
    assert sorted(r[0] for r in rows) == sorted(i["url"] for i in items)
    by_url = {r[0]: r for r in rows}
    for item in items:
        assert by_url[item["url"]][1:] == (200, item["title"], item["fetched_at"], item["body"])
    with pytest.raises(NotConfigured):
        SQLitePipeline.from_crawler(crawler())


def test_sqlite_example_commits_in_batches(tmp_path):
    db = tmp_path / "pages.db"
    store = SQLitePipeline(str(db), batch_size=4, max_wait=3600)
    store.open_spider()
    run([store], [page(f"http://a.test/{i}", b"") for i in range(6)])

    def count() -> int:
        with closing(sqlite3.connect(db)) as conn:
            return conn.execute("SELECT count(*) FROM pages").fetchone()[0]

    assert count() == 4  # one batch committed, two rows waiting
    store.close_spider()
    assert count() == 6


def test_a_kept_page_costs_the_content_check_a_few_bytes():
    """A broad crawl keeps every page's content hash to its end: 100,000 kept pages hold a
    slot of a flat table each (an 8-byte key and an 8-byte journal offset), not a dict entry
    with a 16-byte bytes object and an int, about 135 bytes a page."""
    import gc
    import tracemalloc

    dup = ContentDupPipeline.from_crawler(crawler())  # a one-pass crawl's (no revisits)
    dup.open_spider()
    n = 100_000
    items = [{"url": f"http://h{i}.test/", "body": b"<p>page %d</p>" % i} for i in range(n)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for item in items:
            dup.process_item(item)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # the same bodies under other URLs are still found, after all that growth
    _, dropped = run([dup], [page("http://copy.test/", b"<p>page 4321</p>")])
    dup.close_spider()
    assert dropped == ["duplicate content of http://h4321.test/"]
    assert held / n < 60, f"{held / n:.0f} bytes a kept page"
