"""``BitmapDupeFilter``: larbin's ``hashTable`` as Scrapy's ``DUPEFILTER_CLASS``, crash-safe in
``JOBDIR/dupefilter/``."""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.job import job_dir
from scrapy.utils.request import RequestFingerprinter, referer_str
from twisted.internet.task import LoopingCall

from larbinscrapy import fatal
from larbinscrapy import meta as M
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.seen.bitchain import BloomChain
from larbinscrapy.seen.bitset import KHashBitSet, bitmap_bits_for, bloom_size
from larbinscrapy.seen.seenfile import (
    JOURNAL_NAME,
    SNAPSHOT_HEADER,
    SNAPSHOT_NAME,
    BlockHeader,
    CorruptSnapshotError,
    SnapshotError,
    SnapshotMismatchError,
    read_bits,
    read_headers,
    replay_journal,
    write_snapshot,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.spiders import Spider
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

    from larbinscrapy.reactor import Clock

logger = logging.getLogger(__name__)

MODES = {"bitmap": 0, "bloom": 1, "scalable": 2}
FLUSH_INTERVAL = 1.0  # seconds: the journal reaches the OS at least this often
STATS_INTERVAL = 5.0  # seconds between fill-ratio stats updates


__all__ = [
    "SNAPSHOT_HEADER",
    "BitmapDupeFilter",
    "CorruptSnapshotError",
    "CountingDupeFilter",
    "SnapshotError",
    "SnapshotMismatchError",
]


def _no_records() -> None:
    """No frontier owns this seen-set: nothing to write before it."""


class WriteOrder:
    """What of the marked keys may reach the disk yet: the frontier's records go first
    (``records_first``), and the keys of links still on their way to the scheduler wait
    (``holds``; ``bitset.added[:held_from]`` may go meanwhile, a snapshot waits)."""

    __slots__ = ("held_from", "holds", "records_first", "snapshot_due")

    def __init__(self) -> None:
        self.records_first: Callable[[], None] = _no_records  # write_after() sets it
        self.holds = 0
        self.held_from = 0
        self.snapshot_due = False


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

    def hold(self) -> None:
        """Nothing to hold back without a journal (``BitmapDupeFilter`` has one)."""

    def release(self) -> None:
        """See ``hold``."""

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


def _bit_array(
    mode: str, bits: int, capacity: int, error_rate: float, growth: int, tightening: float
) -> KHashBitSet | BloomChain:
    """The seen bits of ``LARBIN_DUPEFILTER_MODE`` (raises ``ValueError`` on a bad value)."""
    if mode not in MODES:
        raise ValueError(
            f"LARBIN_DUPEFILTER_MODE must be 'scalable', 'bloom' or 'bitmap', got {mode!r}"
        )
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"LARBIN_DUPEFILTER_ERROR_RATE must be in (0, 1), got {error_rate!r}")
    if mode == "scalable":
        return BloomChain(capacity, error_rate, growth, tightening)
    m, k = (bits, 1) if mode == "bitmap" else bloom_size(capacity, error_rate)
    return KHashBitSet.create(m, k)


class BitmapDupeFilter(CountingDupeFilter):
    """Seen-URL bits (bitmap, Bloom or scalable Bloom) with a crash-safe snapshot + journal.

    Settings: ``LARBIN_DUPEFILTER_MODE``, ``_BITS``, ``_CAPACITY``, ``_ERROR_RATE``,
    ``_GROWTH``, ``_TIGHTENING``, ``_SNAPSHOT_INTERVAL``, ``_RESET_CORRUPT``; Scrapy's
    ``JOBDIR`` and ``DUPEFILTER_DEBUG``.
    """

    def __init__(
        self,
        *,
        mode: str = "bitmap",
        bits: int = 64_000_000,
        capacity: int = 10_000_000,
        error_rate: float = 0.001,
        growth: int = 2,
        tightening: float = 0.5,
        path: str | os.PathLike[str] | None = None,
        snapshot_interval: float = 300.0,
        reset_corrupt: bool = False,
        debug: bool = False,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        stats: StatsCollector | None = None,
        clock: Clock | None = None,
    ) -> None:
        if snapshot_interval <= 0:
            raise ValueError(
                f"LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL must be > 0 s, got {snapshot_interval!r}"
            )
        self.mode, self.error_rate = mode, error_rate
        self.bitset = _bit_array(mode, bits, capacity, error_rate, growth, tightening)
        # The hot path: the gate calls this per link, so skip one Python call level.
        self.seen_fingerprint = self.bitset.test_and_set
        self.knows_fingerprint = self.bitset.__contains__  # the test without the set
        self.fingerprinter: RequestFingerprinterProtocol = fingerprinter or RequestFingerprinter()
        self.dir = Path(path) if path is not None else None
        self.snapshot_interval = snapshot_interval
        self.reset_corrupt, self.debug, self.stats = reset_corrupt, debug, stats
        self.filtered = 0
        self._clock = clock
        self._journal: BinaryIO | None = None
        # Called with the error when a journal or snapshot write fails (the scheduler's stop).
        self.on_disk_error: Callable[[OSError], None] | None = None
        self._order = WriteOrder()  # what of the marked keys may reach the disk yet
        self._loops: list[LoopingCall] = []
        self._logdupes = True
        self._warned = False
        self._filters_reported = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        jobdir = job_dir(settings)
        return cls(
            mode=settings.get("LARBIN_DUPEFILTER_MODE"),
            bits=settings.getint("LARBIN_DUPEFILTER_BITS"),
            capacity=settings.getint("LARBIN_DUPEFILTER_CAPACITY"),
            error_rate=settings.getfloat("LARBIN_DUPEFILTER_ERROR_RATE"),
            growth=settings.getint("LARBIN_DUPEFILTER_GROWTH"),
            tightening=settings.getfloat("LARBIN_DUPEFILTER_TIGHTENING"),
            path=os.path.join(jobdir, "dupefilter") if jobdir else None,
            snapshot_interval=settings.getfloat("LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL"),
            reset_corrupt=settings.getbool("LARBIN_DUPEFILTER_RESET_CORRUPT"),
            debug=settings.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
            stats=crawler.stats,
        )

    # --- the checks -----------------------------------------------------------------------

    # larbin's ``testSet``: True if ``fp`` was seen (all bits set), else mark it seen. The
    # bitset's own method, set per instance in __init__.
    seen_fingerprint: Callable[[bytes], bool]

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
        if isinstance(bitset, BloomChain):
            self._report_growth(bitset)
        if not self._warned and bitset.estimated_fp_rate > self.error_rate:
            self._warned = True
            logger.warning("%s", self.sizing_advice())

    def _report_growth(self, chain: BloomChain) -> None:
        """Count the chain's filters; say so (INFO: it is rare, and memory grows) when it grew."""
        filters = len(chain.filters)
        if self.stats is not None:
            self.stats.set_value("larbin/dupefilter/filters", filters)
        if filters > self._filters_reported:
            if self._filters_reported:
                logger.info(
                    "Dupefilter grew to %d Bloom filters (%.1f MiB) at ~%d URLs seen",
                    filters,
                    chain.nbytes / 2**20,
                    chain.estimated_items,
                )
            self._filters_reported = filters

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

    def hold(self) -> None:
        """The newest key marked belongs to a link the gate hands to the scheduler a reactor
        turn later: it (and what follows) stays off the disk until ``release``. A bit on disk
        before its URL's record is a URL a ``kill -9`` loses: the page comes back, the link is
        taken for seen, and no record of it exists."""
        order = self._order
        if not order.holds:
            added = self.bitset.added
            order.held_from = len(added) - 1 if added else 0
        order.holds += 1

    def release(self) -> None:
        self._order.holds -= 1

    def flush(self) -> None:
        """Hand the journal to the OS: every key set so far survives a kill of the process,
        but those of links still on their way to the scheduler (``hold``)."""
        added = self.bitset.added
        journal = self._journal
        if journal is None or added is None:
            return
        order = self._order
        n = order.held_from if order.holds else len(added)
        if n:
            journal.write(b"".join(added[:n]))
            del added[:n]
            order.held_from = 0
        journal.flush()

    def write_snapshot(self) -> None:
        """Atomically replace the snapshot with the current bits, then empty the journal."""
        if self.dir is None:
            return
        started = time.perf_counter()
        bitset = self.bitset
        write_snapshot(self.dir, MODES[self.mode], self._arrays())
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
        clock = self._clock if self._clock is not None else installed_reactor()
        plan = [(self._tick_stats, STATS_INTERVAL)]
        if self.dir is not None:
            plan += [
                (self._tick_flush, FLUSH_INTERVAL),
                (self._tick_snapshot, self.snapshot_interval),
            ]
        for func, interval in plan:
            loop = LoopingCall(func)
            loop.clock = clock  # type: ignore[assignment]  # typed as the zope interface IReactorTime
            loop.start(interval, now=False).addErrback(_log_loop_failure)
            self._loops.append(loop)

    def _tick_stats(self) -> None:
        self.publish_stats()

    def write_after(self, flush_records: Callable[[], None]) -> None:
        """Call ``flush_records`` (the frontier's) before this clock's journal flush and
        snapshot: a bit on disk ahead of its URL's record is a URL a ``kill -9`` loses (the
        resumed crawl takes it for seen and has no record of it)."""
        self._order.records_first = flush_records

    def _tick_flush(self) -> None:
        if self._order.snapshot_due and not self._order.holds:
            self._tick_snapshot()  # flushes too
            return
        try:
            self._order.records_first()
            self.flush()
        except OSError as exc:
            self._disk_failed(f"Dupefilter journal flush failed; retry in {FLUSH_INTERVAL} s", exc)

    def _tick_snapshot(self) -> None:
        if self._order.holds:  # a held link's bit would be in it: the next flush tick takes it
            if not self._order.snapshot_due and self.stats is not None:
                self.stats.inc_value("larbin/dupefilter/snapshots_put_off")
            self._order.snapshot_due = True
            return
        self._order.snapshot_due = False
        try:
            self._order.records_first()
            self.write_snapshot()
        except OSError as exc:
            self._disk_failed("Dupefilter snapshot failed; the journal grows until one works", exc)

    def _disk_failed(self, message: str, exc: OSError) -> None:
        """A write failed: the owner (the scheduler) stops the crawl, or we log and retry."""
        if self.on_disk_error is not None:
            self.on_disk_error(exc)
        else:
            logger.error("%s: %s", message, exc)

    def abandon(self) -> None:
        """Stop writing for good (the job directory failed): what is on disk stays as it is.

        Bits not yet in the journal are dropped, never written after the frontier records
        that had to precede them failed to reach the disk: on resume such a URL is at worst
        fetched twice, never lost.
        """
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
        journal, self._journal = self._journal, None
        if journal is not None:
            fatal.abandon_file(journal)
        self.bitset.added = None

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

    def _arrays(self) -> list[KHashBitSet]:
        """The bit arrays, in snapshot order (the chain's filters, oldest first)."""
        bitset = self.bitset
        return bitset.filters if isinstance(bitset, BloomChain) else [bitset]

    def _read_snapshot(self, path: Path) -> None:
        """Check the snapshot's headers against the settings, then read each block's bits
        straight into its array (streamed: no copy of the file in memory)."""
        blocks = read_headers(path, MODES.values())
        bitset = self.bitset
        if isinstance(bitset, BloomChain):
            expected = [bitset.plan(i)[:2] for i in range(len(blocks))]
        else:
            expected = [(bitset.m, bitset.k)]
        found = [(block.m, block.k) for block in blocks]
        if {block.mode for block in blocks} != {MODES[self.mode]} or found != expected:
            saved = next(name for name, code in MODES.items() if code == blocks[0].mode)
            raise SnapshotMismatchError(
                f"{path} was written with mode={saved} m={blocks[0].m} k={blocks[0].k}"
                f" ({len(blocks)} bit arrays), but the settings now give mode={self.mode}"
                f" m={expected[0][0]} k={expected[0][1]}: a bit array cannot be resized."
                " Use the LARBIN_DUPEFILTER_MODE/BITS/CAPACITY/ERROR_RATE/GROWTH/TIGHTENING"
                " the job started with, or a new JOBDIR."
            )
        if isinstance(bitset, BloomChain):
            bitset.grow_to(len(blocks))
        for array, block in zip(self._arrays(), blocks, strict=True):
            _load_block(path, block, array)
        if isinstance(bitset, BloomChain):
            bitset.settle()

    def _replay_journal(self, path: Path) -> int:
        """Set the bits of every whole journal record; a torn last record is ignored."""
        replayed, torn = replay_journal(path, self.bitset.test_and_set)
        if torn:
            logger.warning(
                "Dupefilter journal %s ends with a torn %d-byte record (an unclean stop); ignored",
                path,
                torn,
            )
        return replayed


def _load_block(path: Path, block: BlockHeader, array: KHashBitSet) -> None:
    """The bits of ``block`` into ``array``'s own buffer, checked as ``KHashBitSet.load`` does
    (no bit past ``m``, the header's count); ``CorruptSnapshotError`` (the caller clears)."""
    buffer = array.buffer()
    read_bits(path, block, buffer)
    spare = array.m % 8
    if spare and buffer[-1] >> spare:
        raise CorruptSnapshotError(path, "bits are set past the end of the bit array")
    real = array.bits.count()
    if real != block.bits_set and not block.dirty:
        raise CorruptSnapshotError(
            path, f"header says {block.bits_set} bits are set, the array has {real}"
        )
    array.count = real


def _log_loop_failure(failure: object) -> None:
    logger.error("Dupefilter periodic task stopped: %s", failure)


def _round_up(n: int) -> int:
    """Round up to two significant digits, so the advice reads like a setting."""
    step = 10 ** max(0, int(math.log10(max(n, 1))) - 1)
    return -(-n // step) * step


def _mib(bits: int) -> str:
    return f"{bits / 8 / 2**20:.1f} MiB"
