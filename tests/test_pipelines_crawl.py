"""The storage pipelines over real ``scrapy crawl larbin`` runs of the test web (issue 7).

``tests/test_pipelines.py`` drives each pipeline with hand-made items; here the items come from
a crawl: one crawl of the default test web with every store on (simple save, mirror, WARC and
the SQLite example of docs/pipelines.md), a control crawl with the content-duplicate pipeline
off (so the duplicate checks can fail), and a SQLite crawl stopped with SIGINT and resumed.
Every stored body is compared with the bytes the test web serves for that URL.
Every store is turned on by its setting alone, as docs/pipelines.md says (``LARBIN_SQLITE_PATH``
included: the example is listed in ``ITEM_PIPELINES`` and off until the path is set).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from larbinscrapy.pipelines.mirrorsave import mirror_path
from larbinscrapy.pipelines.simplesave import INDEX_NAME, relative_name
from tests.support.crawl import ROOT, Crawl, run_crawl, seeds_args
from tests.support.resume import run_until
from testweb.harness import RunningWeb, start_web

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

SKIPPED_IN_REPO = {".git", ".pytest_cache", ".ruff_cache", "__pycache__", ".mypy_cache"}


def store_settings(out: Path, **more: Any) -> dict[str, Any]:
    """Every store on, each writing under ``out``."""
    return {
        "LARBIN_SIMPLE_SAVE": True,
        "LARBIN_SIMPLE_SAVE_DIR": out / "save",
        "LARBIN_MIRROR_SAVE": True,
        "LARBIN_MIRROR_DIR": out / "mirror",
        "LARBIN_WARC": True,
        "LARBIN_WARC_DIR": out / "warc",
        "LARBIN_SQLITE_PATH": out / "pages.db",
        **more,
    }


def files_changed_since(start_ns: int, roots: list[Path], skip: Path) -> list[Path]:
    """Files under ``roots`` (caches, .git and ``skip`` left out) modified after ``start_ns``."""
    changed = []
    for top in roots:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [
                d for d in dirnames if d not in SKIPPED_IN_REPO and Path(dirpath, d) != skip
            ]
            for name in filenames:
                path = Path(dirpath, name)
                try:
                    if path.lstat().st_mtime_ns >= start_ns:
                        changed.append(path)
                except FileNotFoundError:
                    continue
    return changed


@dataclass
class Stored:
    """One crawl with every store on and what each store holds."""

    web: RunningWeb
    crawl: Crawl
    out: Path
    index: list[dict[str, Any]]  # save/index.jsonl
    warc_files: list[Path]
    warc: list[tuple[str, str, bytes]]  # (record type, target URI, payload) in file order
    sqlite: list[tuple[str, int, str, bytes]]  # (url, status, title, body)
    changed_elsewhere: list[Path]  # files modified during the crawl outside ``out``

    @property
    def items(self) -> list[str]:
        return [i["url"] for i in self.crawl.items]

    def responses(self) -> list[str]:
        return [uri for kind, uri, _ in self.warc if kind == "response"]

    def ok_fetched(self) -> set[str]:
        """Fetched URLs the server answered 200: the pages a crawl can store."""
        pages = self.web.web.pages
        return {
            u for u in self.crawl.fetched(self.web.port) if u in pages and pages[u].status == 200
        }


def read_warc(paths: list[Path]) -> list[tuple[str, str, bytes]]:
    records = []
    for path in paths:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                uri = record.rec_headers.get_header("WARC-Target-URI") or ""
                records.append((record.rec_type, uri, record.content_stream().read()))
    return records


def crawl_with_stores(web: RunningWeb, out: Path, **more: Any) -> Stored:
    start_ns = time.time_ns()
    crawl = run_crawl(web, out, *seeds_args(web.seeds), settings=store_settings(out, **more))
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["finish_reason"] == "finished"
    index_path = out / "save" / INDEX_NAME
    index = [json.loads(line) for line in index_path.read_text().splitlines()]
    warc_files = sorted((out / "warc").iterdir())
    with closing(sqlite3.connect(out / "pages.db")) as db:
        rows = db.execute("SELECT url, status, title, body FROM pages").fetchall()
    return Stored(
        web,
        crawl,
        out,
        index,
        warc_files,
        read_warc(warc_files),
        rows,
        files_changed_since(start_ns, [ROOT, out.parent], skip=out),
    )


@pytest.fixture(scope="module")
def pipelines_web(tmp_path_factory) -> RunningWeb:
    with start_web(tmp_path_factory.mktemp("pipelines-web")) as web:
        yield web


@pytest.fixture(scope="module")
def stored(pipelines_web, tmp_path_factory) -> Stored:
    """The default test web crawled with every store on (content duplicates dropped)."""
    return crawl_with_stores(pipelines_web, tmp_path_factory.mktemp("stores"))


@pytest.fixture(scope="module")
def control(pipelines_web, tmp_path_factory) -> Stored:
    """The same crawl with ``LARBIN_CONTENT_DUP=False``, 50 files a simple-save directory."""
    return crawl_with_stores(
        pipelines_web,
        tmp_path_factory.mktemp("control"),
        LARBIN_CONTENT_DUP=False,
        LARBIN_SIMPLE_SAVE_FILES_PER_DIR=50,
    )


# -- content duplicates -------------------------------------------------------------------
def stored_urls(s: Stored) -> dict[str, list[str]]:
    """The URLs each store holds, in its own order (repeats kept, so they can be counted)."""
    return {
        "items.jsonl": s.items,
        "simple-save index": [e["url"] for e in s.index],
        "WARC responses": s.responses(),
        "SQLite": [row[0] for row in s.sqlite],
    }


def test_each_duplicate_group_is_stored_once(stored):
    fetched = stored.ok_fetched()
    groups = [g & fetched for g in stored.web.web.duplicate_groups]
    assert sum(len(g) > 1 for g in groups) >= 2, "the crawl fetched too few duplicates"
    for store, urls in stored_urls(stored).items():
        assert len(urls) == len(set(urls)), f"{store} holds a URL twice"
        assert set(urls) <= fetched, store
        for group in groups:
            if group:
                assert len(group & set(urls)) == 1, (store, sorted(group & set(urls)))
        # nothing but the declared copies is missing
        assert fetched - set(urls) <= set().union(*groups), (store, sorted(fetched - set(urls)))
    dropped = sum(len(g) - 1 for g in groups if g)
    assert stored.crawl.stats["larbin/contentdup/dropped"] == dropped
    assert len(stored.items) == len(fetched) - dropped


def test_without_contentdup_every_copy_is_stored(control):
    fetched = control.ok_fetched()
    duplicated = set().union(*control.web.web.duplicate_groups) & fetched
    assert len(duplicated) >= 4
    for store, urls in stored_urls(control).items():
        assert len(urls) == len(set(urls)), f"{store} holds a URL twice"
        assert set(urls) == fetched, (store, sorted(fetched ^ set(urls)))
    assert "larbin/contentdup/dropped" not in control.crawl.stats


# -- simple save -----------------------------------------------------------------------
def check_simple_save(s: Stored, files_per_dir: int) -> None:
    root = s.out / "save"
    pages = s.web.web.pages
    items = {i["url"]: i for i in s.crawl.items}
    assert [e["file"] for e in s.index] == [
        relative_name(n, files_per_dir) for n in range(len(s.index))
    ]
    assert {e["url"] for e in s.index} == set(items)
    for entry in s.index:
        url = entry["url"]
        body = (root / entry["file"]).read_bytes()
        assert body == pages[url].body, url
        assert entry["length"] == len(body)
        item = items[url]
        assert (entry["status"], entry["content_type"], entry["fetched_at"]) == (
            item["status"],
            item["content_type"],
            item["fetched_at"],
        ), url
    on_disk = set()
    per_dir = Counter()
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            relative = Path(dirpath, name).relative_to(root).as_posix()
            if relative != INDEX_NAME:
                on_disk.add(relative)
                per_dir[Path(relative).parent.as_posix()] += 1
    assert on_disk == {e["file"] for e in s.index}
    assert max(per_dir.values()) <= files_per_dir
    assert len(per_dir) == -(-len(s.index) // files_per_dir)  # no directory left half-empty


def test_simple_save_index_and_files_agree(stored):
    check_simple_save(stored, 2000)


def test_simple_save_spreads_files_over_directories(control):
    check_simple_save(control, 50)
    assert len(control.index) > 100  # so three directories or more


# -- mirror save ------------------------------------------------------------------------
def check_mirror(s: Stored) -> None:
    root = s.out / "mirror"
    real_root = os.path.realpath(root)
    expected = {mirror_path(url): url for url in s.items}
    assert len(expected) == len(s.items), "two stored URLs map to the same mirror file"
    for relative, url in expected.items():
        assert (root / relative).read_bytes() == s.web.web.pages[url].body, url
    found = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            assert not path.is_symlink(), path
            assert os.path.realpath(path).startswith(real_root + os.sep), path
        found.update(Path(dirpath, n).relative_to(root).as_posix() for n in filenames)
    assert found == set(expected), sorted(found ^ set(expected))
    # nothing written beside the stores: not in the output directory, not in the repository
    assert {p.name for p in s.out.iterdir()} == {
        "save",
        "mirror",
        "warc",
        "pages.db",
        "items.jsonl",
        "stats.json",
        "stderr.log",
    }
    # the repository may be edited meanwhile: a file holding a served page is the crawl's
    bodies = {page.body for page in s.web.web.pages.values()}
    leaked = [
        p for p in s.changed_elsewhere if p.stat().st_size < 1 << 20 and p.read_bytes() in bodies
    ]
    assert leaked == []


def test_mirror_holds_every_stored_page_at_its_path(stored):
    check_mirror(stored)
    assert any(p.endswith("/index.html") for p in map(mirror_path, stored.items))


def test_mirror_holds_every_copy_without_contentdup(control):
    check_mirror(control)


# -- WARC -------------------------------------------------------------------------------
def warcio_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def check_warc(s: Stored) -> None:
    assert s.warc_files
    for path in s.warc_files:
        assert path.name.endswith(".warc.gz")
        check = warcio_cli("check", "-v", str(path))
        assert check.returncode == 0, check.stdout + check.stderr
        assert "digest pass" in check.stdout and "fail" not in check.stdout, check.stdout
        index = warcio_cli("index", "-f", "warc-type,warc-target-uri,length", str(path))
        assert index.returncode == 0, index.stderr
        lines = [json.loads(line) for line in index.stdout.splitlines()]
        assert lines[0]["warc-type"] == "warcinfo"
        assert Counter(e["warc-type"] for e in lines[1:]) == {
            "response": len(lines[1:]) // 2,
            "request": len(lines[1:]) // 2,
        }
    kinds = Counter(kind for kind, _, _ in s.warc)
    assert kinds == {
        "warcinfo": len(s.warc_files),
        "response": len(s.items),
        "request": len(s.items),
    }
    requests = [uri for kind, uri, _ in s.warc if kind == "request"]
    assert sorted(s.responses()) == sorted(requests) == sorted(s.items)
    for kind, uri, payload in s.warc:
        if kind == "response":
            assert payload == s.web.web.pages[uri].body, uri


def test_warc_files_pass_warcio_and_hold_one_response_per_stored_page(stored):
    check_warc(stored)


def test_warc_rotates_by_size_and_every_file_passes(pipelines_web, tmp_path):
    rotated = crawl_with_stores(pipelines_web, tmp_path, LARBIN_WARC_SIZE_MAX=20_000)
    assert len(rotated.warc_files) >= 5
    check_warc(rotated)


# -- SQLite example -----------------------------------------------------------------------
def test_sqlite_rows_are_the_stored_pages(stored):
    pages = stored.web.web.pages
    assert sorted(row[0] for row in stored.sqlite) == sorted(stored.items)
    for url, status, title, body in stored.sqlite:
        assert (status, body) == (200, pages[url].body), url
        assert title == (pages[url].title if pages[url].is_html else None), url


def read_items(out: Path) -> list[str]:
    path = out / "items.jsonl"
    return [json.loads(line)["url"] for line in path.read_text().splitlines() if line.strip()]


def test_sqlite_example_stores_every_page_once_across_sigint_and_resume(web, tmp_path):
    db = tmp_path / "pages.db"
    settings = {
        "JOBDIR": tmp_path / "job",
        "DOWNLOAD_DELAY": 0.1,
        "LARBIN_SQLITE_PATH": db,
    }
    first = run_until(web, tmp_path / "run1", settings, after_requests=60, sig=signal.SIGINT)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["finish_reason"] == "shutdown"
    first_items = read_items(tmp_path / "run1")
    with closing(sqlite3.connect(db)) as conn:  # the last batch was committed at the stop
        assert sorted(r[0] for r in conn.execute("SELECT url FROM pages")) == sorted(first_items)

    second = run_crawl(web, tmp_path / "run2", *seeds_args(web.seeds), settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats["finish_reason"] == "finished"
    assert "Resuming" in second.stderr
    second_items = read_items(tmp_path / "run2")
    assert first_items and set(second_items) - set(first_items), "the stop was not mid-crawl"

    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT url, status, body FROM pages").fetchall()
        total, distinct = conn.execute("SELECT count(*), count(DISTINCT url) FROM pages").fetchone()
    assert total == distinct == len(rows)
    urls = {url for url, _, _ in rows}
    assert urls == set(first_items) | set(second_items)

    # the ground truth's 200 pages, one per group of identical pages
    pages = web.web.pages
    truth = web.web.ground_truth(web.seeds, depth=5)
    assert first.fetched(web.port) | second.fetched(web.port) == truth
    # (non-HTML pages stop at their headers: larbin checkType, and this pipeline asks for none)
    ok = {u for u in truth if u in pages and pages[u].status == 200 and pages[u].is_html}
    groups = [g & ok for g in web.web.duplicate_groups if g & ok]
    assert urls <= ok
    assert ok - urls == set().union(*groups) - urls
    for group in groups:
        assert len(group & urls) == 1, sorted(group & urls)
    for url, status, body in rows:
        assert (status, body) == (200, pages[url].body), url
