"""Huge and binary responses are handled and counted, never a crash (real crawls)."""

from __future__ import annotations

import pytest

from tests.support.crawl import run_crawl, seeds_args

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


def _seeds(web) -> list[str]:
    # Seeds skip the link filters, so forbidden-extension files can be asked for directly.
    return [
        web.url("h00.test"),
        web.url("h00.test", "/docs/report.pdf"),
        web.url("h00.test", "/dist/archive.zip"),
        web.url("h00.test", "/notes.txt"),
    ]


# larbin checkType stops other types at their headers (tests/test_hostile_checktype.py): asked for
KEEP = {"LARBIN_FETCH_CONTENT_TYPES": "application/pdf application/zip text/plain"}


def test_binary_responses_become_items_without_links(web, tmp_path):
    crawl = run_crawl(
        web, tmp_path / "out", "-a", "depth=0", *seeds_args(_seeds(web)), settings=KEEP
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr
    items = {item["url"]: item for item in crawl.items}
    pdf = items[web.url("h00.test", "/docs/report.pdf")]
    assert pdf["content_type"] == "application/pdf"
    assert pdf["length"] == len(web.web.pages[pdf["url"]].body)
    assert pdf["links"] == [] and pdf["title"] is None
    text = items[web.url("h00.test", "/notes.txt")]
    assert text["content_type"] == "text/plain" and text["links"] == []


def test_responses_over_download_maxsize_are_dropped_and_counted(web, tmp_path):
    # The binary files are 2,048 bytes: over a 1,900-byte DOWNLOAD_MAXSIZE they are cancelled.
    crawl = run_crawl(
        web,
        tmp_path / "out",
        "-a",
        "depth=0",
        *seeds_args(_seeds(web)),
        settings={"DOWNLOAD_MAXSIZE": 1900, **KEEP},
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr
    stored = {item["url"] for item in crawl.items}
    assert web.url("h00.test", "/docs/report.pdf") not in stored
    assert web.url("h00.test", "/dist/archive.zip") not in stored
    assert web.url("h00.test", "/notes.txt") in stored  # small pages still go through
    # counted under the reason, not a crash: exactly the two files that were too big
    assert crawl.stats["larbin/failed/DownloadCancelledError"] == 2, crawl.stats
    assert crawl.stats["finish_reason"] == "finished"
