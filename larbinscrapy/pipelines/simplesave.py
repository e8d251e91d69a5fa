"""Save each page's body under a numbered name (larbin ``SIMPLE_SAVE``)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from larbinscrapy.items import storable

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

INDEX_NAME = "index.jsonl"


def relative_name(number: int, files_per_dir: int) -> str:
    """``dNNNNN/fNNNNN`` for the page numbered ``number`` (both counted from 0)."""
    return f"d{number // files_per_dir:05d}/f{number:05d}"


def read_index(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Return the index entries and the byte length of its complete lines."""
    entries: list[dict[str, Any]] = []
    good = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                entries.append(json.loads(line))
            except ValueError:
                break
            good += len(line)
    return entries, good


class SimpleSavePipeline:
    """Writes each page body to a numbered file and indexes it (larbin SIMPLE_SAVE)."""

    def __init__(
        self, directory: str, files_per_dir: int = 2000, stats: StatsCollector | None = None
    ) -> None:
        if files_per_dir < 1:
            raise ValueError("LARBIN_SIMPLE_SAVE_FILES_PER_DIR must be at least 1")
        self.root = Path(directory)
        self.files_per_dir = files_per_dir
        self.stats = stats
        self.next_number = 0
        self._index: IO[bytes] | None = None
        self._current_dir: Path | None = None  # the dNNNNN known to exist

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SimpleSavePipeline:
        settings = crawler.settings
        if not settings.getbool("LARBIN_SIMPLE_SAVE"):
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        return cls(
            directory=settings["LARBIN_SIMPLE_SAVE_DIR"],
            files_per_dir=settings.getint("LARBIN_SIMPLE_SAVE_FILES_PER_DIR"),
            stats=crawler.stats,
        )

    def open_spider(self, spider: Any = None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        index = self.root / INDEX_NAME
        if index.exists():
            entries, good = read_index(index)
            if good < index.stat().st_size:
                logger.warning("simplesave: cut a torn last line of %s", index)
                os.truncate(index, good)
            if entries:
                last = entries[-1]["file"]
                self.next_number = int(last.rsplit("/f", 1)[1]) + 1
            logger.info("simplesave: %d pages already in %s", len(entries), self.root)
        self._index = open(index, "ab")  # noqa: SIM115

    def close_spider(self, spider: Any = None) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if item.get("changed") is False:  # a revisit of a page already stored (LARBIN_REVISIT)
            self._inc("unchanged")
            return item
        body = item.get("body")
        if body is None:
            self._inc("nobody")
            return item
        if not storable(item):  # the page asked for noindex (LARBIN_OBEY_NOINDEX)
            self._inc("noindex")
            return item
        if self._index is None:
            raise RuntimeError("SimpleSavePipeline used before open_spider()")
        name = relative_name(self.next_number, self.files_per_dir)
        path = self.root / name
        if path.parent != self._current_dir:
            path.parent.mkdir(exist_ok=True)
            self._current_dir = path.parent
        path.write_bytes(body)
        entry = {
            "file": name,
            "url": item.get("url"),
            "status": item.get("status"),
            "content_type": item.get("content_type"),
            "length": len(body),
            "fetched_at": item.get("fetched_at"),
        }
        self._index.write(json.dumps(entry, ensure_ascii=False).encode("utf-8") + b"\n")
        self._index.flush()
        self.next_number += 1
        self._inc("saved")
        return item

    def _inc(self, event: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/simplesave/{event}")
