"""``BitmapDupeFilter``: larbin's ``hashTable`` as Scrapy's ``DUPEFILTER_CLASS``.

A fixed-size bit array instead of a set of fingerprints: 8 MB for larbin's 64,000,000 bits
whatever the number of URLs (a set of SHA1 fingerprints costs ~120 bytes per URL). The key is
``crawler.request_fingerprinter.fingerprint(request)`` (``REQUEST_FINGERPRINTER_CLASS`` is
honoured); the bit positions come from its first 16 bytes (``larbinscrapy.bitset``).

Modes (``LARBIN_DUPEFILTER_MODE``):

- ``bitmap``: one hash, ``LARBIN_DUPEFILTER_BITS`` bits (larbin's default 64,000,000).
- ``bloom``: k hashes, m and k from ``LARBIN_DUPEFILTER_CAPACITY`` and
  ``LARBIN_DUPEFILTER_ERROR_RATE`` (m = -n ln p / ln(2)^2, k = round(m/n ln 2)).

Both use our own k-hash bit array, not pybloom-live (the user's named package): pybloom-live
re-hashes every key with hashlib and measures ~160k checks/s here, against ~2.3M/s for our bitmap
and ~450k/s for our Bloom filter at k=10 (the fingerprint is already a hash, so we only slice it);
it also hashes non-``str`` keys as ``str(key)`` and cannot be checked against a journal.

The link gate calls ``seen_fingerprint(fp)`` for every link before building a ``Request``, then
marks the request with ``meta["larbin_admitted"] = url`` so ``request_seen`` does not test it
twice. Filtered links and requests are counted in ``larbin/dupefilter/filtered``.

False positives drop new URLs silently, so they are reported: ``larbin/dupefilter/bits_set``,
``fill_ratio`` and ``estimated_fp_rate`` (fill_ratio ** k) every few seconds and at close, and
one WARNING, saying what to set, when the estimate passes ``LARBIN_DUPEFILTER_ERROR_RATE``.

Files, with ``JOBDIR`` (none without it), in ``JOBDIR/dupefilter/``:

- ``snapshot``: a 36-byte header (magic, version, mode, m, k, bits set, crc32 of the bits) and
  the bit array; written to ``snapshot.tmp``, fsynced and renamed over the old one (larbin
  renames ``hashtable.bak``) when the filter opens, every ``LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL``
  seconds and at close. The write is synchronous in the reactor thread: it is rare and short
  (8 MB, tens of ms), and doing it inline means no key can be set between the copy that is saved
  and the journal truncation that follows it, which a threaded write would have to handle.
- ``journal``: the 16-byte keys set since the snapshot, appended and handed to the OS every
  second and on ``flush()`` (the scheduler calls it before it records that outlinks were queued),
  so ``kill -9`` loses nothing marked seen. Replayed on open; a torn last record is ignored.

A corrupt snapshot stops the crawl unless ``LARBIN_DUPEFILTER_RESET_CORRUPT`` is set; then it is
renamed aside (``snapshot.corrupt-<time>``) and the filter starts empty.
"""

from __future__ import annotations

import logging
import math
import os
import struct
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.job import job_dir
from scrapy.utils.request import RequestFingerprinter, referer_str
from twisted.internet.task import LoopingCall

from larbinscrapy import meta as M
from larbinscrapy.bitset import (
    KEY_BYTES,
    KHashBitSet,
    bitmap_bits_for,
    bloom_size,
)

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol
    from twisted.internet.interfaces import IReactorTime

logger = logging.getLogger(__name__)

MODES = {"bitmap": 0, "bloom": 1}
SNAPSHOT_MAGIC = b"LRBNDUPF"
SNAPSHOT_VERSION = 1
# magic, version, mode, reserved, m, k, bits set, crc32 of the bit array
SNAPSHOT_HEADER = struct.Struct(">8sHBBQIQI")
SNAPSHOT_NAME = "snapshot"
JOURNAL_NAME = "journal"
FLUSH_INTERVAL = 1.0  # seconds: the journal reaches the OS at least this often
STATS_INTERVAL = 5.0  # seconds between fill-ratio stats updates


class SnapshotError(Exception):
    """The dupefilter snapshot in JOBDIR cannot be used."""


class CorruptSnapshotError(SnapshotError):
    """The snapshot file is damaged (magic, crc, length)."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(
            f"Dupefilter snapshot {path} is corrupt: {what}. Set"
            " LARBIN_DUPEFILTER_RESET_CORRUPT=True to move it aside and start with an empty"
            " dupefilter (pages seen before may be fetched again)."
        )
        self.path = path
        self.what = what


class SnapshotMismatchError(SnapshotError):
    """The snapshot was written with another mode, m or k than the settings give now."""


class CountingDupeFilter(BaseDupeFilter):
    """What every larbinscrapy seen-set shares: the ``larbin/dupefilter/filtered`` count and
    Scrapy's "log the first duplicate" habit. Subclasses set ``stats``, ``debug``,
    ``filtered = 0`` and ``_logdupes = True``."""

    stats: StatsCollector | None
    debug: bool
    filtered: int
    _logdupes: bool

    def count_filtered(self, n: int) -> None:
        """Count ``n`` links the gate dropped as seen (once per page, not per link)."""
        if n:
            self.filtered += n
            if self.stats is not None:
                self.stats.inc_value("larbin/dupefilter/filtered", n)

    def log(self, request: Request, spider: Spider | None = None) -> None:
        if self.debug:
            logger.debug(
                "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                {"request": request, "referer": referer_str(request)},
                extra={"spider": spider},
            )
        elif self._logdupes:
            logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
                extra={"spider": spider},
            )
            self._logdupes = False
        self.count_filtered(1)


class BitmapDupeFilter(CountingDupeFilter):
    """Seen-URL bit array (bitmap or Bloom) with a crash-safe snapshot + journal in JOBDIR.

    Settings: ``LARBIN_DUPEFILTER_MODE``, ``_BITS``, ``_CAPACITY``, ``_ERROR_RATE``,
    ``_SNAPSHOT_INTERVAL``, ``_RESET_CORRUPT``; Scrapy's ``JOBDIR`` and ``DUPEFILTER_DEBUG``.
    """

    def __init__(
        self,
        *,
        mode: str = "bitmap",
        bits: int = 64_000_000,
        capacity: int = 10_000_000,
        error_rate: float = 0.001,
        path: str | os.PathLike[str] | None = None,
        snapshot_interval: float = 300.0,
        reset_corrupt: bool = False,
        debug: bool = False,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        stats: StatsCollector | None = None,
        clock: IReactorTime | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"LARBIN_DUPEFILTER_MODE must be 'bitmap' or 'bloom', got {mode!r}")
        if not 0.0 < error_rate < 1.0:
            raise ValueError(f"LARBIN_DUPEFILTER_ERROR_RATE must be in (0, 1), got {error_rate!r}")
        if snapshot_interval <= 0:
            raise ValueError(
                f"LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL must be > 0 s, got {snapshot_interval!r}"
            )
        m, k = (bits, 1) if mode == "bitmap" else bloom_size(capacity, error_rate)
        self.mode = mode
        self.error_rate = error_rate
        self.bitset = KHashBitSet.create(m, k)
        # The hot path: the gate calls this per link, so skip one Python call level.
        self.seen_fingerprint = self.bitset.test_and_set
        self.fingerprinter: RequestFingerprinterProtocol = fingerprinter or RequestFingerprinter()
        self.dir = Path(path) if path is not None else None
        self.snapshot_interval = snapshot_interval
        self.reset_corrupt = reset_corrupt
        self.debug = debug
        self.stats = stats
        self.filtered = 0
        self._clock = clock
        self._journal: BinaryIO | None = None
        self._loops: list[LoopingCall] = []
        self._logdupes = True
        self._warned = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        jobdir = job_dir(settings)
        return cls(
            mode=settings.get("LARBIN_DUPEFILTER_MODE"),
            bits=settings.getint("LARBIN_DUPEFILTER_BITS"),
            capacity=settings.getint("LARBIN_DUPEFILTER_CAPACITY"),
            error_rate=settings.getfloat("LARBIN_DUPEFILTER_ERROR_RATE"),
            path=os.path.join(jobdir, "dupefilter") if jobdir else None,
            snapshot_interval=settings.getfloat("LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL"),
            reset_corrupt=settings.getbool("LARBIN_DUPEFILTER_RESET_CORRUPT"),
            debug=settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
            stats=crawler.stats,
        )

    # --- the checks -----------------------------------------------------------------------

    def seen_fingerprint(self, fp: bytes) -> bool:  # replaced per instance by the bitset's
        """larbin's ``testSet``: True if ``fp`` was seen (all bits set), else mark it seen."""
        return self.bitset.test_and_set(fp)

    def request_seen(self, request: Request) -> bool:
        if request.meta.get(M.ADMITTED) == request.url:
            return False  # the link gate already tested and set this URL's bits
        return self.seen_fingerprint(self.fingerprinter.fingerprint(request))


    # --- false-positive reporting -----------------------------------------------------------

    @property
    def fill_ratio(self) -> float:
        return self.bitset.fill_ratio

    @property
    def estimated_fp_rate(self) -> float:
        return self.bitset.estimated_fp_rate

    def publish_stats(self) -> None:
        """Set the fill stats and warn (once) when the false-positive estimate is too high."""
        bitset = self.bitset
        if self.stats is not None:
            self.stats.set_value("larbin/dupefilter/bits_set", bitset.count)
            self.stats.set_value("larbin/dupefilter/fill_ratio", bitset.fill_ratio)
            self.stats.set_value("larbin/dupefilter/estimated_fp_rate", bitset.estimated_fp_rate)
        if not self._warned and bitset.estimated_fp_rate > self.error_rate:
            self._warned = True
            logger.warning("%s", self.sizing_advice())

    def sizing_advice(self) -> str:
        """What is wrong and what to set, for room for twice the URLs seen so far."""
        bitset = self.bitset
        seen = bitset.estimated_items
        target = 2 * max(seen, 1)
        bloom_m, _ = bloom_size(target, self.error_rate)
        if self.mode == "bitmap":
            bits = _round_up(bitmap_bits_for(target, self.error_rate))
            fix = (
                f"set LARBIN_DUPEFILTER_BITS={bits} ({_mib(bits)}), or the 'bloom' mode:"
                f" LARBIN_DUPEFILTER_MODE='bloom' with LARBIN_DUPEFILTER_CAPACITY="
                f"{_round_up(target)} ({_mib(bloom_m)})"
            )
        else:
            fix = f"set LARBIN_DUPEFILTER_CAPACITY={_round_up(target)} ({_mib(bloom_m)})"
        return (
            f"Dupefilter ({self.mode}, m={bitset.m} bits, k={bitset.k}) is "
            f"{bitset.fill_ratio:.1%} full: its estimated false-positive rate "
            f"{bitset.estimated_fp_rate:.3g} passes"
            f" LARBIN_DUPEFILTER_ERROR_RATE={self.error_rate:g},"
            f" so that share of new URLs is dropped as already seen. For ~{seen} URLs seen so far"
            f" and room to double, {fix}; a new size needs a new JOBDIR."
        )

    # --- lifecycle and persistence ------------------------------------------------------------

    def open(self) -> None:
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._load_snapshot(self.dir / SNAPSHOT_NAME)
            replayed = self._replay_journal(self.dir / JOURNAL_NAME)
            self._journal = (self.dir / JOURNAL_NAME).open("ab")
            self.write_snapshot()  # folds the journal in and truncates it
            self.bitset.added = []
            logger.info(
                "Dupefilter loaded from %s: %d bits set (%d journal records replayed)",
                self.dir,
                self.bitset.count,
                replayed,
            )
        self.publish_stats()
        self._start_loops()

    def close(self, reason: str) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        self.publish_stats()
        if self._journal is not None:
            self.flush()
            self.write_snapshot()
            self._journal.close()
            self._journal = None
            self.bitset.added = None

    def flush(self) -> None:
        """Hand the journal to the OS: every key set so far survives a kill of the process."""
        added = self.bitset.added
        journal = self._journal
        if journal is None or added is None:
            return
        if added:
            journal.write(b"".join(added))
            added.clear()
        journal.flush()

    def write_snapshot(self) -> None:
        """Atomically replace the snapshot with the current bits, then empty the journal."""
        if self.dir is None:
            return
        started = time.perf_counter()
        bitset = self.bitset
        header = SNAPSHOT_HEADER.pack(
            SNAPSHOT_MAGIC,
            SNAPSHOT_VERSION,
            MODES[self.mode],
            0,
            bitset.m,
            bitset.k,
            bitset.count,
            bitset.crc32(),
        )
        final = self.dir / SNAPSHOT_NAME
        tmp = self.dir / (SNAPSHOT_NAME + ".tmp")
        with tmp.open("wb") as f:
            f.write(header)
            f.write(bitset.buffer())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        _fsync_dir(self.dir)
        # Only now is everything in the journal also in a durable snapshot.
        if bitset.added is not None:
            bitset.added.clear()
        if self._journal is not None:
            self._journal.truncate(0)
        logger.debug(
            "Dupefilter snapshot written: %d bits set, %.1f ms",
            bitset.count,
            (time.perf_counter() - started) * 1000,
        )

    def _start_loops(self) -> None:
        clock = self._clock
        if clock is None:
            from twisted.internet import reactor as clock  # the one Scrapy installed
        plan = [(self._tick_stats, STATS_INTERVAL)]
        if self.dir is not None:
            plan += [
                (self._tick_flush, FLUSH_INTERVAL),
                (self._tick_snapshot, self.snapshot_interval),
            ]
        for func, interval in plan:
            loop = LoopingCall(func)
            loop.clock = clock
            loop.start(interval, now=False).addErrback(_log_loop_failure)
            self._loops.append(loop)

    def _tick_stats(self) -> None:
        self.publish_stats()

    def _tick_flush(self) -> None:
        try:
            self.flush()
        except OSError:
            logger.exception("Dupefilter journal flush failed; retrying in %s s", FLUSH_INTERVAL)

    def _tick_snapshot(self) -> None:
        try:
            self.write_snapshot()
        except OSError:
            logger.exception("Dupefilter snapshot failed; the journal grows until one works")

    def _load_snapshot(self, path: Path) -> None:
        if not path.exists():
            return
        try:
            self._read_snapshot(path)
        except CorruptSnapshotError as exc:
            if not self.reset_corrupt:
                raise
            aside = path.with_name(f"{SNAPSHOT_NAME}.corrupt-{int(time.time())}")
            os.replace(path, aside)
            self.bitset.clear()
            logger.error(
                "Dupefilter snapshot %s is corrupt (%s); LARBIN_DUPEFILTER_RESET_CORRUPT=True:"
                " starting with an empty dupefilter, the corrupt file is kept as %s",
                path,
                exc.what,
                aside,
            )

    def _read_snapshot(self, path: Path) -> None:
        data = path.read_bytes()
        size = SNAPSHOT_HEADER.size
        if len(data) < size:
            raise CorruptSnapshotError(
                path, f"the file is {len(data)} bytes, shorter than its header"
            )
        magic, version, mode, _, m, k, count, crc = SNAPSHOT_HEADER.unpack_from(data)
        if magic != SNAPSHOT_MAGIC:
            raise CorruptSnapshotError(path, f"bad magic {magic!r} (expected {SNAPSHOT_MAGIC!r})")
        if version != SNAPSHOT_VERSION or mode not in MODES.values():
            raise CorruptSnapshotError(path, f"unknown version {version} or mode {mode}")
        bitset = self.bitset
        if (mode, m, k) != (MODES[self.mode], bitset.m, bitset.k):
            saved = next(name for name, code in MODES.items() if code == mode)
            raise SnapshotMismatchError(
                f"{path} was written with mode={saved} m={m} k={k}, but the settings now give"
                f" mode={self.mode} m={bitset.m} k={bitset.k}: a bit array cannot be resized."
                " Use the LARBIN_DUPEFILTER_MODE/BITS/CAPACITY/ERROR_RATE the job started with,"
                " or a new JOBDIR."
            )
        body = memoryview(data)[size:]
        if len(body) != bitset.nbytes:
            raise CorruptSnapshotError(
                path, f"{len(body)} bytes of bits after the header, expected {bitset.nbytes}"
            )
        if zlib.crc32(body) != crc:
            raise CorruptSnapshotError(path, "the crc32 of the bit array does not match its header")
        try:
            bitset.load(body, count)
        except ValueError as exc:
            raise CorruptSnapshotError(path, str(exc)) from exc

    def _replay_journal(self, path: Path) -> int:
        """Set the bits of every whole journal record; a torn last record is ignored."""
        if not path.exists():
            return 0
        data = path.read_bytes()
        whole = len(data) - len(data) % KEY_BYTES
        if whole != len(data):
            logger.warning(
                "Dupefilter journal %s ends with a torn %d-byte record (an unclean stop); ignored",
                path,
                len(data) - whole,
            )
        test_and_set = self.bitset.test_and_set
        for start in range(0, whole, KEY_BYTES):
            test_and_set(data[start : start + KEY_BYTES])
        return whole // KEY_BYTES


def _fsync_dir(path: Path) -> None:
    """Make a rename durable (the directory entry is data too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _log_loop_failure(failure: object) -> None:
    logger.error("Dupefilter periodic task stopped: %s", failure)


def _round_up(n: int) -> int:
    """Round up to two significant digits, so the advice reads like a setting."""
    step = 10 ** max(0, int(math.log10(max(n, 1))) - 1)
    return -(-n // step) * step


def _mib(bits: int) -> str:
    return f"{bits / 8 / 2**20:.1f} MiB"
