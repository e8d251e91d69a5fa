"""``JsonLinesExporter`` writes exactly the bytes of Scrapy's ``JsonLinesItemExporter``.

Every case exports the same items through both and compares the files byte for byte: pages
with and without their optional fields, empty fields exported or not, a field with its own
serializer, non-ASCII text with and without an encoding, and the shapes that take Scrapy's own
path (dicts, a mapping of output names, no field list, a subclass's ``serialize_field``).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import scrapy
from scrapy.exporters import JsonLinesItemExporter
from scrapy.utils.test import get_crawler

from larbinscrapy.items import PageItem
from larbinscrapy.lean.exporters import JsonLinesExporter
from settings import base

PAGE = {
    "url": "http://127.0.0.1/s3/page12.html",
    "status": 200,
    "depth": 3,
    "referer": "http://127.0.0.1/",
    "fetched_at": "2026-12-01T12:00:00+00:00",
    "content_type": "text/html",
    "length": 18,
    "ip": "127.0.0.1",
    "body": b"<html>...</html>",
    "headers": {"Server": "nginx"},
    "title": "Caf\u00e9 \u2013 \u65e5\u672c",
    "keywords": None,
    "description": 'a "quoted"\nline',
    "links": ["http://127.0.0.1/a", "http://127.0.0.1/b"],
    "noindex": False,
    "canonical": None,
}


class Priced(scrapy.Item):
    """An item with a field serializer."""

    name = scrapy.Field()
    price = scrapy.Field(serializer=lambda cents: f"{cents / 100:.2f}")
    seen = scrapy.Field()


class Upper(JsonLinesExporter):
    """A user's exporter with its own serialize_field."""

    def serialize_field(self, field: Any, name: str, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class UpperScrapy(JsonLinesItemExporter):
    """The same on Scrapy's exporter."""

    def serialize_field(self, field: Any, name: str, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


def exported(cls: type[JsonLinesItemExporter], items: list[Any], **options: Any) -> bytes:
    out = io.BytesIO()
    exporter = cls(out, **options)
    exporter.start_exporting()
    for item in items:
        exporter.export_item(item)
    exporter.finish_exporting()
    return out.getvalue()


def pages() -> list[Any]:
    revisited = PageItem(**PAGE, changed=True, fetch_count=2)
    bare = PageItem(url="http://127.0.0.1/x", status=404)  # most fields never set
    return [PageItem(**PAGE), revisited, bare]


@pytest.mark.parametrize("empty", [False, True])
@pytest.mark.parametrize("encoding", ["utf-8", None, "latin-1"])
def test_pages_are_the_same_bytes(empty: bool, encoding: str | None) -> None:
    items = pages()
    if encoding == "latin-1":  # text latin-1 can encode
        for page in items[:2]:
            page["title"] = "Caf\u00e9"
    options = {
        "fields_to_export": base.FEED_EXPORT_FIELDS,
        "export_empty_fields": empty,
        "encoding": encoding,
    }
    ours = exported(JsonLinesExporter, items, **options)
    assert ours == exported(JsonLinesItemExporter, items, **options)
    first = json.loads(ours.splitlines()[0].decode(encoding or "ascii"))
    assert "body" not in first and "headers" not in first
    assert first["title"] == items[0]["title"]
    assert len(ours.splitlines()) == len(items)


@pytest.mark.parametrize("empty", [False, True])
def test_a_declared_serializer_is_applied(empty: bool) -> None:
    items = [
        Priced(name="tea", price=250, seen=datetime(2026, 12, 1, tzinfo=UTC)),
        Priced(name="cup"),
    ]
    options = {
        "fields_to_export": ["price", "name", "seen", "undeclared"],
        "export_empty_fields": empty,
    }
    ours = exported(JsonLinesExporter, items, **options)
    assert ours == exported(JsonLinesItemExporter, items, **options)
    assert json.loads(ours.splitlines()[0])["price"] == "2.50"


@pytest.mark.parametrize(
    "options",
    [
        {"fields_to_export": {"url": "address", "title": "name"}},
        {"fields_to_export": None},
        {"fields_to_export": ["url", ("title", "name")]},
        {},
    ],
    ids=["mapping", "none", "renamed", "default"],
)
def test_other_shapes_take_scrapys_path(options: dict[str, Any]) -> None:
    items: list[Any] = pages()
    for page in items:  # with every field exported, bytes are not JSON: neither writes them
        page.pop("body", None)
    items.append({"url": "http://127.0.0.1/d", "title": "a dict item"})
    assert exported(JsonLinesExporter, items, **options) == exported(
        JsonLinesItemExporter, items, **options
    )


def test_a_subclass_serialize_field_is_honoured() -> None:
    options = {"fields_to_export": base.FEED_EXPORT_FIELDS}
    ours = exported(Upper, pages(), **options)
    assert ours == exported(UpperScrapy, pages(), **options)
    assert json.loads(ours.splitlines()[0])["url"] == PAGE["url"].upper()


def test_the_jsonl_feeds_of_a_crawl_use_it() -> None:
    crawler = get_crawler(settings_dict={k: v for k, v in vars(base).items() if k.isupper()})
    exporters = crawler.settings.getwithbase("FEED_EXPORTERS")
    ours = "larbinscrapy.lean.exporters.JsonLinesExporter"
    assert exporters["jsonl"] == exporters["jsonlines"] == ours
    assert exporters["json"] == "scrapy.exporters.JsonItemExporter"
