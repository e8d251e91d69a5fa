"""BitmapDupeFilter and the k-hash bit array: keys, persistence, crashes, false positives."""

from __future__ import annotations

import logging
import math
import os
import random
import re
import shutil
import struct
from typing import TYPE_CHECKING

import pytest
import redis
from scrapy import Request
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler
from twisted.internet.task import Clock

from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.parse.urls import CanonicalUrlFingerprinter
from larbinscrapy.seen.bitset import (
    KHashBitSet,
    OneHashBitSet,
    bitmap_bits_for,
    bloom_size,
    theoretical_fp_rate,
)
from larbinscrapy.seen.dupefilter import (
    SNAPSHOT_HEADER,
    BitmapDupeFilter,
    CorruptSnapshotError,
    SnapshotMismatchError,
)
from tests.support.crawl import LARBIN_DEFAULTS
from tests.support.marks import server_params
from tests.support.redisserver import redis_server

if TYPE_CHECKING:
    from pathlib import Path

SMALL_BITS = 1 << 20
# Every seen-set implementation the crawl can use: the local filter in its three modes, and the
# Redis one (a real redis-server) in both modes.
KINDS = ["bitmap", "bloom", "scalable", "redis-bitmap", "redis-bloom"]


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory):
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=server_params(KINDS, lambda kind: kind.startswith("redis-")))
def any_filter(request):
    """A factory of empty filters of one kind: ``any_filter(capacity=...)``."""
    kind = request.param
    if not kind.startswith("redis-"):
        return lambda **kwargs: make_filter(mode=kind, **kwargs)
    server = redis.Redis.from_url(request.getfixturevalue("shared_redis"))
    server.flushdb()

    def make(**kwargs) -> RedisBitmapDupeFilter:
        kwargs.setdefault("bits", SMALL_BITS)
        return RedisBitmapDupeFilter(
            server,
            "t:seen",
            mode=kind.removeprefix("redis-"),
            fingerprinter=CanonicalUrlFingerprinter(),
            **kwargs,
        )

    return make


def make_filter(path: Path | None = None, **kwargs) -> BitmapDupeFilter:
    kwargs.setdefault("bits", SMALL_BITS)
    kwargs.setdefault("fingerprinter", CanonicalUrlFingerprinter())
    kwargs.setdefault("clock", Clock())
    return BitmapDupeFilter(path=path, **kwargs)


def keys(n: int, seed: int | None = None) -> list[bytes]:
    """n random 16-byte keys, like xxh3 fingerprints (seeded: reproducible; None: fresh)."""
    blob = os.urandom(16 * n) if seed is None else random.Random(seed).randbytes(16 * n)
    return [blob[i : i + 16] for i in range(0, 16 * n, 16)]


# --- keys: what counts as the same request --------------------------------------------------

SAME_OR_NOT = [
    # (first, second, second is a duplicate)
    (Request("http://a.test/p"), Request("http://a.test/p"), True),
    (Request("http://a.test/p?b=1&a=2"), Request("http://a.test/p?a=2&b=1"), True),
    (Request("http://a.test/p"), Request("http://a.test/p#fragment"), True),
    (Request("http://a.test/p"), Request("http://a.test/q"), False),
    (Request("http://a.test/p"), Request("http://a.test/p", method="POST"), False),
    (
        Request("http://a.test/p", method="POST", body=b"x=1"),
        Request("http://a.test/p", method="POST", body=b"x=2"),
        False,
    ),
    (
        Request("http://a.test/p", method="POST", body=b"x=1"),
        Request("http://a.test/p", method="POST", body=b"x=1"),
        True,
    ),
]


@pytest.mark.parametrize(("first", "second", "duplicate"), SAME_OR_NOT)
def test_request_seen_table(any_filter, first: Request, second: Request, duplicate: bool) -> None:
    df = any_filter(capacity=10_000)
    assert df.request_seen(first) is False
    assert df.request_seen(second) is duplicate
    assert df.request_seen(second) is True


@pytest.mark.parametrize(("first", "second", "duplicate"), SAME_OR_NOT)
def test_scrapy_sha1_fingerprints_work_too(
    first: Request, second: Request, duplicate: bool
) -> None:
    """Scrapy's default fingerprinter returns 20-byte SHA1: the first 16 bytes are used."""
    df = make_filter(fingerprinter=RequestFingerprinter())
    assert len(df.fingerprinter.fingerprint(first)) == 20
    assert df.request_seen(first) is False
    assert df.request_seen(second) is duplicate


@pytest.mark.parametrize("mode", ["bitmap", "bloom", "scalable"])
@pytest.mark.parametrize("key", [b"", b"short", b"x" * 15, b"y" * 16, b"z" * 20, b"w" * 64])
def test_any_key_length(mode: str, key: bytes) -> None:
    df = make_filter(mode=mode, capacity=1000)
    assert df.seen_fingerprint(key) is False
    assert df.seen_fingerprint(key) is True


def test_fingerprint_url_matches_request_seen() -> None:
    """The gate tests fingerprint_url(url); a later request_seen of Request(url) agrees."""
    df = make_filter()
    url = "http://a.test/x?b=1&a=2#f"
    assert df.seen_fingerprint(df.fingerprinter.fingerprint_url(url)) is False
    assert df.request_seen(Request("http://a.test/x?a=2&b=1")) is True


def test_larbin_admitted_short_circuit() -> None:
    df = make_filter()
    url = "http://a.test/page"
    assert df.seen_fingerprint(df.fingerprinter.fingerprint_url(url)) is False
    count = df.bitset.count
    admitted = Request(url, meta={"larbin_admitted": url})
    assert df.request_seen(admitted) is False
    assert df.request_seen(admitted) is False
    assert df.bitset.count == count
    # Not admitted for this URL (e.g. a redirect kept the meta): tested as usual.
    moved = Request("http://a.test/other", meta={"larbin_admitted": url})
    assert df.request_seen(moved) is False
    assert df.request_seen(moved) is True
    assert df.request_seen(Request(url)) is True


# --- the bit array -----------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "k"), [(1_000_003, 1), (1_000_003, 7), (64, 10), (4096, 3)])
def test_positions_are_double_hashing(m: int, k: int) -> None:
    bitset = KHashBitSet.create(m, k)
    for key in [*keys(200, seed=1), b"z" * 20]:
        h1 = int.from_bytes(key[:8], "big")
        h2 = int.from_bytes(key[8:16], "big") | 1
        assert bitset.positions(key) == [(h1 + i * h2) % m for i in range(k)]


def test_count_is_kept_exactly() -> None:
    for bitset in (KHashBitSet.create(5000, 1), KHashBitSet.create(5000, 6)):
        for key in keys(3000, seed=2):
            bitset.test_and_set(key)
        assert bitset.count == bitset.bits.count()
        assert isinstance(bitset, OneHashBitSet) == (bitset.k == 1)


def test_bloom_size_standard_formulas() -> None:
    assert bloom_size(1_000_000, 0.001) == (14_377_588, 10)
    assert bloom_size(10_000_000, 0.01)[1] == 7
    with pytest.raises(ValueError, match="error rate"):
        bloom_size(10, 1.5)
    # 1 - e^(-n/m) = p
    assert math.isclose(1 - math.exp(-1e6 / bitmap_bits_for(1_000_000, 0.01)), 0.01, rel_tol=1e-6)


def test_bad_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="LARBIN_DUPEFILTER_MODE"):
        make_filter(mode="hash")


# --- persistence --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["bitmap", "bloom", "scalable"])
def test_snapshot_and_journal_survive_close_and_reopen(tmp_path: Path, mode: str) -> None:
    ks = keys(500, seed=3)
    df = make_filter(tmp_path, mode=mode, capacity=10_000)
    df.open()
    for key in ks:
        assert df.seen_fingerprint(key) is False
    df.close("finished")
    assert (tmp_path / "snapshot").stat().st_size == SNAPSHOT_HEADER.size + df.bitset.nbytes
    assert (tmp_path / "journal").stat().st_size == 0

    again = make_filter(tmp_path, mode=mode, capacity=10_000)
    again.open()
    assert again.bitset.count == df.bitset.count
    assert all(again.seen_fingerprint(key) for key in ks)
    again.close("finished")


def test_crash_after_flush_keeps_every_flushed_key(tmp_path: Path) -> None:
    live = tmp_path / "live" / "dupefilter"
    df = make_filter(live)
    df.open()
    flushed = keys(300, seed=4)
    for key in flushed:
        df.seen_fingerprint(key)
    df.flush()
    for key in keys(50, seed=5):  # set but never flushed: may be lost, must not break anything
        df.seen_fingerprint(key)
    # kill -9 now: copy the files as they are on disk, never close.
    assert (live / "journal").stat().st_size == 16 * len(flushed)
    crashed = tmp_path / "crashed"
    shutil.copytree(live, crashed)

    reopened = make_filter(crashed)
    reopened.open()
    assert all(reopened.seen_fingerprint(key) for key in flushed)
    assert (crashed / "journal").stat().st_size == 0  # folded into the new snapshot
    reopened.close("finished")
    df.close("finished")


def test_crash_after_periodic_snapshot(tmp_path: Path) -> None:
    """Keys before the periodic snapshot live in it, keys after it in the journal."""
    clock = Clock()
    df = make_filter(tmp_path, clock=clock, snapshot_interval=60)
    df.open()
    before, after = keys(200, seed=6), keys(200, seed=7)
    for key in before:
        df.seen_fingerprint(key)
    clock.advance(60)  # snapshot tick: journal folded in and truncated
    assert (tmp_path / "journal").stat().st_size == 0
    for key in after:
        df.seen_fingerprint(key)
    clock.advance(1)  # flush tick: the journal reaches the OS without an explicit flush()
    assert (tmp_path / "journal").stat().st_size == 16 * len(after)
    crashed = tmp_path.parent / (tmp_path.name + "-crashed")
    shutil.copytree(tmp_path, crashed)
    reopened = make_filter(crashed)
    reopened.open()
    assert all(reopened.seen_fingerprint(key) for key in before + after)
    reopened.close("finished")
    df.close("finished")


def test_torn_journal_tail_is_tolerated(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    df = make_filter(tmp_path)
    df.open()
    ks = keys(100, seed=8)
    for key in ks:
        df.seen_fingerprint(key)
    df.flush()
    with (tmp_path / "journal").open("ab") as journal:
        journal.write(keys(1, seed=9)[0][:7])  # the process died mid-write

    reopened = make_filter(tmp_path)
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.seen.dupefilter"):
        reopened.open()
    assert "torn 7-byte record" in caplog.text
    assert all(reopened.seen_fingerprint(key) for key in ks)
    assert reopened.bitset.count == len({reopened.bitset.positions(k)[0] for k in ks})
    reopened.close("finished")


def _damage_bad_magic(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[:8] = b"NOTMAGIC"
    path.write_bytes(bytes(data))


def _damage_flip_bit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[SNAPSHOT_HEADER.size + 100] ^= 0x10
    path.write_bytes(bytes(data))


def _damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1000])


def _damage_header_only(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:20])


def _damage_count(path: Path) -> None:
    data = bytearray(path.read_bytes())
    fields = list(SNAPSHOT_HEADER.unpack_from(data))
    fields[6] += 1  # bits-set count no longer matches the array (the crc does)
    data[: SNAPSHOT_HEADER.size] = SNAPSHOT_HEADER.pack(*fields)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (_damage_bad_magic, "bad magic"),
        (_damage_flip_bit, "crc32"),
        (_damage_truncate, "bytes of bits"),
        (_damage_header_only, "shorter than its header"),
        (_damage_count, "bits are set"),
    ],
)
def test_corrupt_snapshot_raises_unless_reset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage, what: str
) -> None:
    df = make_filter(tmp_path)
    df.open()
    journaled = keys(20, seed=10)
    for key in keys(300, seed=11):
        df.seen_fingerprint(key)
    df.close("finished")
    damage(tmp_path / "snapshot")

    with pytest.raises(CorruptSnapshotError) as info:
        make_filter(tmp_path).open()
    message = str(info.value)
    assert str(tmp_path / "snapshot") in message
    assert what in message
    assert "LARBIN_DUPEFILTER_RESET_CORRUPT=True" in message

    # A journal written after the (now corrupt) snapshot is still replayed on reset.
    (tmp_path / "journal").write_bytes(b"".join(journaled))
    reset = make_filter(tmp_path, reset_corrupt=True)
    with caplog.at_level(logging.ERROR, logger="larbinscrapy.seen.dupefilter"):
        reset.open()
    assert [r.levelno for r in caplog.records if "corrupt" in r.getMessage()] == [logging.ERROR]
    assert reset.bitset.count == len(journaled)
    assert len(list(tmp_path.glob("snapshot.corrupt-*"))) == 1
    assert all(reset.seen_fingerprint(key) for key in journaled)
    reset.close("finished")
    make_filter(tmp_path).open()  # the fresh snapshot is good


@pytest.mark.parametrize(
    "changed",
    [{"bits": SMALL_BITS * 2}, {"mode": "bloom", "capacity": 10_000}],
)
def test_settings_mismatch_is_a_clear_error(tmp_path: Path, changed: dict) -> None:
    df = make_filter(tmp_path)
    df.open()
    df.close("finished")
    with pytest.raises(SnapshotMismatchError, match=r"mode=bitmap m=1048576 k=1.*new JOBDIR"):
        make_filter(tmp_path, **changed).open()


def test_without_jobdir_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    df = make_filter()
    df.open()
    for key in keys(100, seed=12):
        df.seen_fingerprint(key)
    df.flush()
    df.close("finished")
    assert list(tmp_path.iterdir()) == []
    assert df.bitset.added is None


# --- through a real crawler -------------------------------------------------------------------


def test_from_crawler_settings_stats_and_jobdir(tmp_path: Path) -> None:
    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "JOBDIR": str(tmp_path),
            "REQUEST_FINGERPRINTER_CLASS": "larbinscrapy.parse.urls.CanonicalUrlFingerprinter",
            "LARBIN_DUPEFILTER_MODE": "bloom",
            "LARBIN_DUPEFILTER_CAPACITY": 5000,
            "LARBIN_DUPEFILTER_ERROR_RATE": 0.01,
        }
    )
    df = BitmapDupeFilter.from_crawler(crawler)
    assert isinstance(df.fingerprinter, CanonicalUrlFingerprinter)
    assert (df.bitset.m, df.bitset.k) == bloom_size(5000, 0.01)
    assert df.dir == tmp_path / "dupefilter"
    df.open()
    request = Request("http://a.test/")
    assert df.request_seen(request) is False
    assert df.request_seen(request) is True
    df.log(request, crawler.spider)
    df.count_filtered(3)
    df.count_filtered(0)
    df.close("finished")
    stats = crawler.stats.get_stats()
    assert stats["larbin/dupefilter/filtered"] == 4
    assert stats["larbin/dupefilter/bits_set"] == df.bitset.k
    assert isinstance(stats["larbin/dupefilter/fill_ratio"], float)
    assert stats["larbin/dupefilter/estimated_fp_rate"] == pytest.approx(
        (df.bitset.k / df.bitset.m) ** df.bitset.k
    )
    assert (tmp_path / "dupefilter" / "snapshot").exists()


def test_log_first_duplicate_only_unless_debug(caplog: pytest.LogCaptureFixture) -> None:
    for debug, expected in [(False, 1), (True, 3)]:
        caplog.clear()
        df = make_filter(debug=debug)
        with caplog.at_level(logging.DEBUG, logger="larbinscrapy.seen.dupefilter"):
            for _ in range(3):
                df.log(Request("http://a.test/"))
        assert (
            len([r for r in caplog.records if "Filtered duplicate" in r.getMessage()]) == expected
        )
        assert df.filtered == 3


# --- false positives: measured against the theory ------------------------------------------------


def _measured_fp_rate(df: BitmapDupeFilter, inserted: int, tested: int) -> float:
    for key in keys(inserted):
        df.seen_fingerprint(key)
    fresh = keys(tested)
    bitset = df.bitset
    return sum(1 for key in fresh if key in bitset) / tested


def test_bitmap_false_positive_rate_matches_theory() -> None:
    m = 1 << 24
    n = round(-m * math.log(0.99))  # 1 - e^(-n/m) = 1%
    df = make_filter(bits=m)
    theory = theoretical_fp_rate(n, m, 1)
    assert theory == pytest.approx(0.01, rel=1e-3)
    measured = _measured_fp_rate(df, n, 1_000_000)
    assert measured == pytest.approx(theory, rel=0.2)
    assert df.estimated_fp_rate == pytest.approx(measured, rel=0.2)


def test_bloom_false_positive_rate_matches_theory() -> None:
    capacity, rate = 100_000, 0.001
    df = make_filter(mode="bloom", capacity=capacity, error_rate=rate)
    theory = theoretical_fp_rate(capacity, df.bitset.m, df.bitset.k)
    assert theory == pytest.approx(rate, rel=0.05)
    measured = _measured_fp_rate(df, capacity, 1_000_000)
    assert measured == pytest.approx(theory, rel=0.2)
    assert df.estimated_fp_rate == pytest.approx(measured, rel=0.2)


def test_warning_when_bitmap_is_undersized(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    stats_crawler = get_crawler()
    df = make_filter(bits=80_000, error_rate=0.001, clock=clock, stats=stats_crawler.stats)
    df.open()
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.seen.dupefilter"):
        for key in keys(50, seed=13):  # 0.06% full: fine
            df.seen_fingerprint(key)
        clock.advance(5)
        assert caplog.records == []
        for key in keys(2000, seed=14):  # ~2.5% full: 25x the configured rate
            df.seen_fingerprint(key)
        clock.advance(5)
        clock.advance(5)
    df.close("finished")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "LARBIN_DUPEFILTER_ERROR_RATE=0.001" in message
    # room to double the ~2050 URLs at 0.1%: 4100 / 0.0010005 ~ 4.1M bits
    bits = int(re.search(r"LARBIN_DUPEFILTER_BITS=(\d+)", message).group(1))
    assert bitmap_bits_for(4100, 0.001) <= bits <= 1.1 * bitmap_bits_for(4200, 0.001)
    assert "LARBIN_DUPEFILTER_CAPACITY=" in message
    assert stats_crawler.stats.get_value("larbin/dupefilter/estimated_fp_rate") > 0.001


def test_no_warning_for_bloom_within_capacity(caplog: pytest.LogCaptureFixture) -> None:
    df = make_filter(mode="bloom", capacity=5000, error_rate=0.01)
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.seen.dupefilter"):
        for key in keys(4000, seed=15):
            df.seen_fingerprint(key)
        df.publish_stats()
        assert caplog.records == []
        for key in keys(6000, seed=16):
            df.seen_fingerprint(key)
        df.publish_stats()
    assert "LARBIN_DUPEFILTER_CAPACITY=" in caplog.text


def test_snapshot_header_layout() -> None:
    """36 bytes, big-endian: magic, version, mode, reserved, m, k, bits set, crc32."""
    assert SNAPSHOT_HEADER.size == 36
    assert struct.calcsize(">8sHBBQIQI") == 36


def test_scrapy_scheduler_uses_it_as_dupefilter_class(tmp_path: Path) -> None:
    """Scrapy's own Scheduler builds it from DUPEFILTER_CLASS and calls log() when it filters."""
    from scrapy.core.scheduler import Scheduler

    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "DUPEFILTER_CLASS": "larbinscrapy.seen.dupefilter.BitmapDupeFilter",
            "REQUEST_FINGERPRINTER_CLASS": "larbinscrapy.parse.urls.CanonicalUrlFingerprinter",
            "LARBIN_DUPEFILTER_MODE": "bitmap",
            "LARBIN_DUPEFILTER_BITS": SMALL_BITS,
            # the default DownloaderAwarePriorityQueue needs a running engine
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
        }
    )
    crawler.spider = crawler._create_spider("test")
    scheduler = Scheduler.from_crawler(crawler)
    assert isinstance(scheduler.df, BitmapDupeFilter)
    assert scheduler.open(crawler.spider) is None
    assert scheduler.enqueue_request(Request("http://a.test/?b=1&a=2")) is True
    assert scheduler.enqueue_request(Request("http://a.test/?a=2&b=1#x")) is False
    url = "http://a.test/gated"
    scheduler.df.seen_fingerprint(scheduler.df.fingerprinter.fingerprint_url(url))
    assert scheduler.enqueue_request(Request(url, meta={"larbin_admitted": url})) is True
    assert scheduler.close("finished") is None
    assert crawler.stats.get_value("larbin/dupefilter/filtered") == 1
