"""Docs that match the code (issue 34, point 9): every setting the docs and the README name
exists, storage settings are listed under storage, and the page item's fields are described as
the spider fills them. Pure: reads the Markdown and ``larbinscrapy/conf/defaults.py``."""

from __future__ import annotations

import re

import pytest
from scrapy.settings import default_settings

from larbinscrapy.conf.defaults import SETTINGS
from larbinscrapy.items import PageItem
from tests.support.crawl import ROOT

DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
LARBIN_NAME = re.compile(r"\bLARBIN_[A-Z0-9_]*[A-Z0-9]\b")
# A settings table's first column, and "-s NAME=VALUE": a setting, not a constant or meta key.
TABLE_NAME = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \|", re.M)
CMDLINE_NAME = re.compile(r"-s ([A-Z][A-Z0-9_]+)=")
# Settings of the projects larbinscrapy runs with, not declared by Scrapy nor here.
OTHERS = frozenset({"REDIS_PARAMS"})  # scrapy-redis's client options (docs/distributed.md)
PLACEHOLDER = "NAME"  # "-s NAME=VALUE"


def _known(name: str) -> bool:
    return (
        name in SETTINGS or hasattr(default_settings, name) or name in OTHERS or name == PLACEHOLDER
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_setting_a_doc_names_exists(doc):
    text = doc.read_text(encoding="utf-8")
    larbin = {n for n in LARBIN_NAME.findall(text) if n not in SETTINGS}
    assert not larbin, f"{doc.name} names settings that are not declared: {sorted(larbin)}"
    named = set(TABLE_NAME.findall(text)) | set(CMDLINE_NAME.findall(text))
    unknown = {n for n in named if not _known(n)}
    assert not unknown, f"{doc.name} names settings that do not exist: {sorted(unknown)}"


def _sections(text: str) -> dict[str, str]:
    """Each ``## Section`` of docs/settings.md and its text."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


STORAGE = (
    "LARBIN_CONTENT_DUP_FLUSH_INTERVAL",
    "LARBIN_ITEM_RECEIPTS",
    "LARBIN_SIMPLE_SAVE_DIR",
    "LARBIN_MIRROR_DIR",
    "LARBIN_WARC_DIR",
    "LARBIN_WARC_SIZE_MAX",
)


def test_storage_settings_are_listed_under_storage():
    sections = _sections((ROOT / "docs" / "settings.md").read_text(encoding="utf-8"))
    for name in STORAGE:
        (title,) = [t for t, body in sections.items() if f"`{name}`" in body]
        assert "storage" in title.lower(), f"{name} is listed under {title!r}"
    storage = (ROOT / "docs" / "storage.md").read_text(encoding="utf-8")
    for name in (
        "LARBIN_FRONTIER_SEGMENT_URLS",
        "LARBIN_FRONTIER_CHECKPOINT_INTERVAL",
        "LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL",
        *STORAGE,
    ):
        assert f"`{name}`" in storage, f"docs/storage.md does not list {name}"


def test_the_item_table_describes_the_fields_as_the_spider_fills_them():
    text = (ROOT / "docs" / "pipelines.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]+ \| ([^\n]+)$", text, re.M))
    assert set(PageItem.fields) <= set(rows), set(PageItem.fields) - set(rows)
    stale = {name: row for name, row in rows.items() if "being added" in row}
    assert not stale, stale


def test_storage_doc_says_when_frontier_files_go():
    text = (ROOT / "docs" / "storage.md").read_text(encoding="utf-8")
    assert "overflow" in text and '"wait"' not in text  # the FIFOs' one name
    assert re.search(r"segment files? [^.]*(deleted|removed)", text), "segment deletion"


DEFAULT_ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]+)` \| `([^`]*)` \|", re.M)


def _same(doc: str, value: object) -> bool:
    if doc in (repr(value), str(value)) or doc == repr(value).replace("'", '"'):
        return True
    try:
        return float(doc.replace("_", "")) == float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


@pytest.mark.parametrize("doc", [d for d in DOCS if d.name != "settings.md"], ids=lambda p: p.name)
def test_a_default_a_doc_gives_is_the_codes(doc):
    rows = DEFAULT_ROW.findall(doc.read_text(encoding="utf-8"))
    wrong = {
        name: (given, SETTINGS[name].default)
        for name, given in rows
        if name in SETTINGS and not _same(given, SETTINGS[name].default)
    }
    assert not wrong, f"{doc.name}: {wrong}"
