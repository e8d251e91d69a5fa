"""larbin's checkType over real crawls: a non-HTML answer stops at its headers unless something
asked for its type (issue #14, item 6). The big-file case (30 MB never read) is in
tests/test_hostile_web.py."""

from __future__ import annotations

import pytest

from tests.support.crawl import run_crawl

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

PDF, ZIP, TXT = "/docs/report.pdf", "/dist/archive.zip", "/notes.txt"


def _crawl(web, out, **settings):
    seeds = [web.url("h00.test")] + [web.url("h00.test", p) for p in (PDF, ZIP, TXT)]
    crawl = run_crawl(web, out, "-a", "depth=0", "-a", "urls=" + ",".join(seeds), settings=settings)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr
    return crawl, {item["url"][len(web.url("h00.test")) - 1 :] for item in crawl.items}


def test_non_html_is_dropped_at_the_headers_and_counted(web, tmp_path):
    crawl, items = _crawl(web, tmp_path / "out")
    assert items == {"/"}  # larbin: HTML only
    assert crawl.stats["larbin/dropped/content_type"] == 3
    assert {PDF, ZIP, TXT} <= {e["path"] for e in crawl.requests}  # asked, cut after the headers
    assert "Not downloading" in crawl.stderr and "checkType" in crawl.stderr  # logged once
    assert crawl.stderr.count("Not downloading") == 1


def test_types_asked_for_are_downloaded(web, tmp_path):
    # by content type, and by larbin's specificSearch extensions
    crawl, items = _crawl(
        web,
        tmp_path / "a",
        LARBIN_FETCH_CONTENT_TYPES="text/plain",
        LARBIN_FRONTIER_PRIORITY_EXTENSIONS=".zip",
    )
    assert items == {"/", TXT, ZIP}
    assert crawl.stats["larbin/dropped/content_type"] == 1  # the PDF: nobody asked for it
    crawl, items = _crawl(web, tmp_path / "c", LARBIN_FETCH_CONTENT_TYPES="application/*")
    assert items == {"/", PDF, ZIP}
    # an archive (the WARC pipeline) asks for every type
    crawl, items = _crawl(web, tmp_path / "b", LARBIN_WARC=True, LARBIN_WARC_DIR=tmp_path / "w")
    assert items == {"/", PDF, ZIP, TXT}
    assert "larbin/dropped/content_type" not in crawl.stats
