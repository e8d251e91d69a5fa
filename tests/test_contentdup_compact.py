"""The content-duplicate journal stays the size of what it must remember (issue 34, point 5): a
continuous crawl whose pages change keeps one record per page, not one per change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from scrapy.exceptions import DropItem

from larbinscrapy.pipelines.contentdup import ContentDupPipeline

if TYPE_CHECKING:
    from pathlib import Path

PAGES = 20
CHANGES = 50


def _item(url: str, body: bytes, fetch_count: int = 1) -> dict[str, Any]:
    return {"url": url, "body": body, "fetch_count": fetch_count}


def _kept(pipeline: ContentDupPipeline, item: dict[str, Any]) -> bool:
    try:
        pipeline.process_item(item)
    except DropItem:
        return False
    return True


def _body(page: int, version: int) -> bytes:
    return f"<p>page {page} version {version}</p>".encode()


@pytest.mark.parametrize("near", [0, 3])
def test_a_changing_page_keeps_one_record_and_duplicates_still_count(tmp_path: Path, near: int):
    directory = tmp_path / "contentdup"
    pipeline = ContentDupPipeline(
        str(directory), near_distance=near, flush_interval=0, compact_min=PAGES
    )
    pipeline.open_spider()
    for version in range(CHANGES):  # every page changes at every revisit
        for page in range(PAGES):
            assert _kept(
                pipeline,
                _item(f"http://a.test/{page}", _body(page, version), fetch_count=version + 1),
            )
        pipeline.checkpoint()  # what the crawl's checkpoint tick does
    assert not _kept(pipeline, _item("http://a.test/copy", _body(3, CHANGES - 1)))
    one_record = len(b"http://a.test/10") + 26
    size = (directory / "journal").stat().st_size  # while the crawl runs
    assert size <= 3 * (PAGES + 1) * one_record, size  # not CHANGES * PAGES records
    pipeline.close_spider()
    assert (directory / "journal").stat().st_size <= (PAGES + 1) * one_record

    again = ContentDupPipeline(str(directory), near_distance=near, flush_interval=0)
    again.open_spider()
    # the current contents are remembered: a copy of one is dropped, the page itself kept
    assert not _kept(again, _item("http://b.test/copy", _body(7, CHANGES - 1)))
    assert _kept(again, _item("http://a.test/7", _body(7, CHANGES - 1), fetch_count=CHANGES + 1))
    # the URL dropped as a copy is still one on its 304 revisit (an empty body)
    assert not _kept(again, _item("http://a.test/copy", b"", fetch_count=2))
    # a content no page has any more is not a duplicate
    assert _kept(again, _item("http://b.test/old", _body(7, 0)))
    again.close_spider()
