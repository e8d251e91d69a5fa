"""Drop pages whose content was already seen under another URL (larbin ``hashDup``, ``NO_DUP``)."""

from __future__ import annotations

import logging
import os
import re
import struct
import tempfile
from itertools import pairwise
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import xxhash
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.asyncio import call_later
from scrapy.utils.job import job_dir

from larbinscrapy import fatal
from larbinscrapy.pipelines.receipts import receipts_of
from larbinscrapy.seen.flat import U64Table

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.asyncio import CallLaterResult

logger = logging.getLogger(__name__)

_HEADER = struct.Struct("<16sQH")  # content hash, simhash (0 = none), URL length
_DUP_MARK = b"\0" * 16  # in place of a content hash: the URL was dropped as a copy
_MAX_URL = 0xFFFF
_MIN_SHINGLES = 8
_MAX_DISTANCE = 31  # a 64-bit simhash in distance + 1 blocks: each block keeps 2 bits at least
_TAGS = re.compile(rb"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.I | re.S)
_WORDS = re.compile(rb"\w+")
_BIT_TABLES = [bytes(b >> bit & 1 for b in range(256)) for bit in range(8)]  # byte -> its bit


_WHITESPACE = b" \t\n\r\x0b\x0c"


def _slot(digest: bytes) -> int:
    """A content hash's key in the table of kept pages: its first 8 bytes."""
    return int.from_bytes(digest[:8], "little")


def url_key(url: str) -> int:
    """The key a copy's (or a kept simhash's) URL is remembered by: 8 bytes of hash, not the URL."""
    return xxhash.xxh3_64_intdigest(url.encode("utf-8")[:_MAX_URL])


def content_hash(body: bytes) -> bytes | None:
    """The 16-byte hash of a body without its whitespace; ``None`` for an empty page."""
    normalised = body.translate(None, _WHITESPACE)
    if not normalised:
        return None
    return xxhash.xxh3_128_digest(normalised)


def simhash(body: bytes) -> int:
    """64-bit simhash of the set of the page's 3-word shingles; 0 when the text is too short.

    Bit-sliced so the per-shingle work stays in C: the 8-byte digests are concatenated, each
    byte column is a slice, and each bit's count is a ``translate`` + ``count`` over it.
    """
    words = _WORDS.findall(_TAGS.sub(b" ", body).lower())
    shingles = set(map(b" ".join, zip(words, words[1:], words[2:], strict=False)))
    if len(shingles) < _MIN_SHINGLES:
        return 0
    digests = b"".join(map(xxhash.xxh3_64_digest, shingles))
    result = 0
    for column in range(8):
        column_bytes = digests[column::8]
        for bit, table in enumerate(_BIT_TABLES):
            if 2 * column_bytes.translate(table).count(1) > len(shingles):
                result |= 1 << (8 * column + bit)
    return result or 1


def simhash_blocks(distance: int) -> list[tuple[int, int]]:
    """(shift, mask) of the ``distance + 1`` blocks of a 64-bit simhash: two simhashes within
    ``distance`` bits agree on one block at least (pigeonhole), so each block is an exact key."""
    if not 0 < distance <= _MAX_DISTANCE:
        raise ValueError(f"near-dup distance must be in 1..{_MAX_DISTANCE}, got {distance}")
    n = distance + 1
    bounds = [64 * i // n for i in range(n + 1)]
    return [(lo, (1 << (hi - lo)) - 1) for lo, hi in pairwise(bounds)]


class SimhashIndex:
    """Finds a kept simhash within Hamming distance k by k + 1 exact block lookups."""

    def __init__(self, distance: int) -> None:
        self._blocks = simhash_blocks(distance)
        self.distance = distance
        self._tables: list[dict[int, list[int]]] = [{} for _ in self._blocks]
        self._offsets: dict[int, int] = {}

    def add(self, h: int, offset: int) -> None:
        if h in self._offsets:
            return
        self._offsets[h] = offset
        for (shift, mask), table in zip(self._blocks, self._tables, strict=True):
            table.setdefault(h >> shift & mask, []).append(h)

    def remove(self, h: int) -> None:
        """Forget ``h`` (its page has another content now)."""
        if self._offsets.pop(h, None) is None:
            return
        for (shift, mask), table in zip(self._blocks, self._tables, strict=True):
            key = h >> shift & mask
            bucket = table.get(key)
            if bucket is not None:
                bucket.remove(h)
                if not bucket:
                    del table[key]

    def find(self, h: int) -> tuple[int, int] | None:
        """Return (offset of the kept page, distance) for a near match, or ``None``."""
        for (shift, mask), table in zip(self._blocks, self._tables, strict=True):
            for other in table.get(h >> shift & mask, ()):
                d = (h ^ other).bit_count()
                if d <= self.distance:
                    return self._offsets[other], d
        return None


class ContentDupPipeline:
    """Drops a page whose (whitespace-normalised) body was already kept under another URL.

    What it remembers is each kept page's current content: with revisits (``LARBIN_REVISIT``)
    a page whose content changed no longer holds its old one, which is forgotten, in memory
    and, at the next compaction, in the journal. The journal is rewritten (a new file, then
    ``os.replace``: a crash leaves the old one whole) on the flush tick once its superseded
    records outnumber the live ones and ``compact_min``, and at close, so it stays the size of
    the live records (``larbin/contentdup/compacted``).
    """

    def __init__(
        self,
        directory: str | None = None,
        near_distance: int = 0,
        flush_interval: float = 1.0,
        stats: StatsCollector | None = None,
        compact_min: int = 4096,
        revisits: bool = True,
    ) -> None:
        self.directory = directory
        self.revisits = revisits  # pages change content: remember whose content is whose
        self.flush_interval = flush_interval
        self.stats = stats
        self.compact_min = compact_min
        self.near = SimhashIndex(near_distance) if near_distance else None
        self._seen = U64Table()  # content hash (8 bytes of it) -> offset of its kept URL
        self._dups: set[int] = set()  # URL keys of pages dropped as copies (for 304 revisits)
        self._owner: dict[int, tuple[bytes, int]] = {}  # URL key -> its kept (hash, simhash)
        self._dead = 0  # journal records superseded since the last compaction
        self._journal: IO[bytes] | None = None
        self._end = 0  # journal length, flushed or not
        self._timer: CallLaterResult | None = None
        self._logged_drop = False
        self.on_disk_error: Callable[[OSError], None] | None = None  # stops the crawl

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentDupPipeline:
        settings = crawler.settings
        if not settings.getbool("LARBIN_CONTENT_DUP"):
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        jobdir = job_dir(settings)
        pipeline = cls(
            directory=str(Path(jobdir, "contentdup")) if jobdir else None,
            near_distance=settings.getint("LARBIN_CONTENT_DUP_NEAR_DISTANCE"),
            flush_interval=settings.getfloat("LARBIN_CONTENT_DUP_FLUSH_INTERVAL"),
            stats=crawler.stats,
            revisits=settings.getbool("LARBIN_REVISIT"),
        )
        pipeline.on_disk_error = fatal.disk_stopper(crawler, pipeline.directory or "(temporary)")
        receipts = receipts_of(crawler)
        if receipts is not None:  # a kept page is acknowledged once its hash is in the OS
            receipts.add_flusher(pipeline.flush)
        return pipeline

    # --- lifecycle ---------------------------------------------------------------------

    def open_spider(self, spider: Any = None) -> None:
        if self.directory:
            os.makedirs(self.directory, exist_ok=True)
            self._journal = open(Path(self.directory, "journal"), "a+b")  # noqa: SIM115
            self._replay()
        else:
            self._journal = tempfile.TemporaryFile()  # noqa: SIM115
        if self.flush_interval > 0:
            self._timer = call_later(self.flush_interval, self._tick)

    def close_spider(self, spider: Any = None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._journal is not None and self._dead and self.directory:
            self._compact()
        if self._journal is not None:
            try:
                self._journal.close()  # flushes the buffer
            except OSError as exc:
                self._disk_failed(exc)
            self._journal = None

    def flush(self) -> None:
        """Hand buffered journal records to the OS (survives a killed process, not a power cut)."""
        if self._journal is not None:
            try:
                self._journal.flush()
            except OSError as exc:
                self._disk_failed(exc)

    def _disk_failed(self, exc: OSError) -> None:
        """The journal cannot be written (a full disk): stop the crawl, write nothing more.

        Pages already kept stay in the journal; a record that did not reach it only means
        the page's duplicates are not recognised after a resume.
        """
        journal, self._journal = self._journal, None
        if journal is not None:
            fatal.abandon_file(journal)
        if self.on_disk_error is not None:
            self.on_disk_error(exc)

    def _tick(self) -> None:
        self.checkpoint()
        if self._journal is not None:
            self._timer = call_later(self.flush_interval, self._tick)

    def checkpoint(self) -> None:
        """Flush; compact the journal once superseded records outnumber the live ones."""
        self.flush()
        if self._dead >= max(self.compact_min, len(self._seen) + len(self._dups)):
            self._compact()

    # --- items -------------------------------------------------------------------------

    def process_item(self, item: Any, spider: Any = None) -> Any:
        url = item.get("url") or ""
        if (item.get("fetch_count") or 1) > 1:  # a revisit: tested too, against its own copy
            self._inc("revisit")
        body = item.get("body")
        digest = content_hash(body) if body else None
        if digest is None:  # empty, or a 304 revisit: as the page was last time
            if self._dups and url_key(url) in self._dups:
                self._drop("dropped", "still a duplicate (not modified)", item)
            self._inc("empty")
            return item
        first = self._seen.get(_slot(digest))
        kept = self._url_at(first, digest) if first is not None else None
        if kept is not None:
            if kept == url:  # its own copy: a revisit, or fetched again after a crash
                self._inc("refetched")
                return item
            self._mark_duplicate(url)
            self._drop("dropped", f"duplicate content of {kept}", item)
        sim = 0
        if self.near is not None:
            sim = simhash(body)
            match = self.near.find(sim) if sim else None
            if match is not None:
                offset, distance = match
                if self._url_at(offset) != url:
                    reason = (
                        f"near-duplicate content of {self._url_at(offset)} (distance {distance})"
                    )
                    self._mark_duplicate(url)
                    self._drop("near_dropped", reason, item)
        offset = self._append(digest, sim, url)
        self._keep(url_key(url), digest, sim, offset)
        self._inc("unique")
        return item

    def _keep(self, key: int, digest: bytes, sim: int, offset: int) -> None:
        """``key``'s page holds ``digest`` now: its former content and copy mark are superseded."""
        former = self._owner.get(key) if self.revisits else None
        if former is not None:
            self._seen.pop(_slot(former[0]))
            if former[1] and self.near is not None:
                self.near.remove(former[1])
            self._dead += 1
        if key in self._dups:  # new content: no longer anybody's copy
            self._dups.discard(key)
            self._dead += 1
        if self.revisits:  # (a one-pass crawl's page never changes: no memory spent on it)
            self._owner[key] = (digest, sim)
        self._seen.set(_slot(digest), offset)
        if sim and self.near is not None:
            self.near.add(sim, offset)

    def _mark_duplicate(self, url: str) -> None:
        """Remember (journaled) that ``url`` is a copy, for its revisits that answer 304."""
        key = url_key(url)
        if key not in self._dups:
            self._dups.add(key)
            self._append(_DUP_MARK, 0, url)

    def _drop(self, event: str, reason: str, item: Any) -> None:
        self._inc(event)
        if not self._logged_drop:
            self._logged_drop = True
            logger.info(
                "Dropping %s: %s (further drops are counted in larbin/contentdup/*)",
                item.get("url"),
                reason,
            )
        raise DropItem(reason, log_level="DEBUG")

    def _inc(self, event: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/contentdup/{event}", count)

    # --- the journal -------------------------------------------------------------------

    def _file(self) -> IO[bytes]:
        if self._journal is None:
            raise RuntimeError("ContentDupPipeline used before open_spider()")
        return self._journal

    def _append(self, digest: bytes, sim: int, url: str) -> int:
        """Append one record; return the offset of its URL."""
        raw = url.encode("utf-8")[:_MAX_URL]
        if self._journal is not None:  # None after a failed write: keep deduplicating in memory
            try:
                self._journal.write(_HEADER.pack(digest, sim, len(raw)) + raw)
            except OSError as exc:
                self._disk_failed(exc)
        url_offset = self._end + _HEADER.size
        self._end = url_offset + len(raw)
        return url_offset

    def _url_at(self, offset: int, digest: bytes | None = None) -> str | None:
        """Read a kept page's URL back from the journal: one small read, only on a match.
        With ``digest``: ``None`` unless the record holds that whole hash (the table matches
        on 8 bytes of it)."""
        journal = self._journal
        if journal is None:  # abandoned after a failed write
            return "a page kept earlier"
        try:
            journal.flush()
        except OSError as exc:
            self._disk_failed(exc)
            return "a page kept earlier"
        start = offset - _HEADER.size
        stored, _, length = _HEADER.unpack(os.pread(journal.fileno(), _HEADER.size, start))
        if digest is not None and stored != digest:
            return None
        return os.pread(journal.fileno(), length, offset).decode("utf-8", "replace")

    def _replay(self) -> None:
        """Load the journal in 1 MiB reads; cut a torn last record left by a crash."""
        journal = self._file()
        count = 0
        for digest, sim, url_offset, raw in _records(journal):
            key = xxhash.xxh3_64_intdigest(raw)
            if digest == _DUP_MARK:
                self._dups.add(key)
            else:
                self._keep(key, digest, sim, url_offset)
            count += 1
        end = journal.tell()
        size = os.fstat(journal.fileno()).st_size
        if size > end:
            logger.warning("contentdup journal: cut %d bytes of a torn last record", size - end)
            journal.truncate(end)
        self._end = end
        self._inc("replayed", count)
        if count:
            logger.info("contentdup: %d content hashes replayed from %s", count, self.directory)

    def _compact(self) -> None:
        """Rewrite the journal with its live records only (module doc); offsets renumbered."""
        if self._journal is None or not self.directory:
            return
        old, path = self._journal, Path(self.directory, "journal")
        tmp = path.with_name("journal.tmp")
        live, marks = self._seen, set(self._dups)
        moved = U64Table()
        near = SimhashIndex(self.near.distance) if self.near is not None else None
        try:
            old.flush()
            with open(tmp, "wb") as out:
                end = 0
                for digest, sim, url_offset, raw in _records(old):
                    if digest == _DUP_MARK:
                        key = xxhash.xxh3_64_intdigest(raw)
                        if key not in marks:
                            continue
                        marks.discard(key)  # one mark a copy
                    elif live.get(_slot(digest)) != url_offset:  # superseded
                        continue
                    out.write(_HEADER.pack(digest, sim, len(raw)) + raw)
                    end += _HEADER.size + len(raw)
                    if digest != _DUP_MARK:
                        moved.set(_slot(digest), end - len(raw))
                        if sim and near is not None:
                            near.add(sim, end - len(raw))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            journal = open(path, "a+b")  # noqa: SIM115
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self._disk_failed(exc)
            return
        old.close()
        self._journal, self._end, self._seen, self._dead = journal, end, moved, 0
        if near is not None:
            self.near = near
        self._inc("compacted")


def _records(journal: IO[bytes]) -> Iterator[tuple[bytes, int, int, bytes]]:
    """``(hash, simhash, URL offset, URL bytes)`` of each whole record, read in 1 MiB chunks;
    the file is left positioned after the last whole one (a torn tail follows it)."""
    journal.seek(0)
    data, base = b"", 0  # base: file offset of data[0]
    while chunk := journal.read(1 << 20):
        data += chunk
        pos = 0
        while pos + _HEADER.size <= len(data):
            digest, sim, length = _HEADER.unpack_from(data, pos)
            end = pos + _HEADER.size + length
            if end > len(data):
                break
            yield digest, sim, base + pos + _HEADER.size, data[pos + _HEADER.size : end]
            pos = end
        data, base = data[pos:], base + pos
    journal.seek(base)
