"""Store pages in SQLite: the worked example of docs/pipelines.md (a user's own pipeline)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from larbinscrapy.pipelines.receipts import receipts_of

if TYPE_CHECKING:
    import sqlite3

    from scrapy.crawler import Crawler

    from larbinscrapy.pipelines.receipts import ItemReceipts, Receipt

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    url TEXT PRIMARY KEY,
    status INTEGER,
    title TEXT,
    fetched_at TEXT,
    body BLOB
)
"""
INSERT = """
INSERT INTO pages (url, status, title, fetched_at, body) VALUES (?, ?, ?, ?, ?)
ON CONFLICT(url) DO NOTHING
"""


class SQLitePipeline:
    """Keeps every page once in a SQLite table, committing in batches."""

    def __init__(
        self,
        path: str,
        batch_size: int = 100,
        max_wait: float = 1.0,
        receipts: ItemReceipts | None = None,
    ) -> None:
        self.path = path
        self.receipts = receipts  # tells the frontier when a row is committed
        self._held: list[Receipt] = []  # receipts of the rows waiting for the next commit
        self.batch_size = batch_size
        self.max_wait = max_wait
        self._rows: list[tuple[Any, ...]] = []
        self._last_commit = time.monotonic()
        self._db: sqlite3.Connection | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SQLitePipeline:
        path = crawler.settings.get("LARBIN_SQLITE_PATH")
        if not path:
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        return cls(
            path,
            batch_size=crawler.settings.getint("LARBIN_SQLITE_BATCH"),
            receipts=receipts_of(crawler),
        )

    def open_spider(self, spider: Any = None) -> None:
        import sqlite3  # here, not at the top: Scrapy imports the class even when it is off

        self._db = sqlite3.connect(self.path)
        self._db.execute("PRAGMA journal_mode=WAL")  # readers do not block the crawl
        self._db.execute(SCHEMA)
        self._db.commit()

    def process_item(self, item: Any, spider: Any = None) -> Any:
        row = (
            item["url"],
            item.get("status"),
            item.get("title"),
            item.get("fetched_at"),
            item.get("body"),
        )
        self._rows.append(row)
        if self.receipts is not None:  # its page is acknowledged once the row is committed
            self._held.append(self.receipts.hold(item))
        waited = time.monotonic() - self._last_commit
        if len(self._rows) >= self.batch_size or waited >= self.max_wait:
            self.commit()
        return item  # pass it on: later pipelines and the feed exports still see it

    def commit(self) -> None:
        """Write the waiting rows in one transaction."""
        if self._db is None:
            raise RuntimeError("SQLitePipeline used before open_spider()")
        if self._rows:
            with self._db:  # one transaction; rolled back if it fails
                self._db.executemany(INSERT, self._rows)
            logger.debug("sqlite: committed %d rows", len(self._rows))
            self._rows.clear()
        if self.receipts is not None and self._held:
            self.receipts.stored(self._held)
            self._held = []
        self._last_commit = time.monotonic()

    def close_spider(self, spider: Any = None) -> None:
        if self._db is not None:
            self.commit()
            self._db.close()
            self._db = None
