"""Seen-set structures side by side: our bitmap and Bloom modes, pybloom-live, Scrapy's set.

Measures, in one run on the same random 16-byte keys (what ``CanonicalUrlFingerprinter`` gives):

- checks/s of ``BitmapDupeFilter.seen_fingerprint`` (bitmap: larbin's 64,000,000 bits; bloom:
  sized for ``--urls`` at 0.1%), of pybloom-live's ``BloomFilter.add`` (same size) and of the
  set test-and-add that ``RFPDupeFilter.request_seen`` does (20-byte SHA1 digests in Scrapy
  2.19; hex strings in older Scrapy and scrapy-redis), for new keys and for keys already seen;
- bytes per URL at 0.1% false positives (bit arrays: their size; sets: tracemalloc);
- the measured false-positive rate after ``--urls`` keys (fresh keys tested without setting),
  next to the theory;
- the time of one snapshot write (the reason it is done synchronously);
- the link gate's whole per-link cost: ``fingerprint_url(url)`` + ``seen_fingerprint``.

    python benchmarks/bench_dupefilter.py [--urls 1000000] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from twisted.internet.task import Clock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from larbinscrapy.bitset import bitmap_bits_for, theoretical_fp_rate
from larbinscrapy.dupefilter import BitmapDupeFilter

RATE = 0.001
LARBIN_BITS = 64_000_000
BATCH = 200_000  # keys are made in batches so --urls 10000000 fits in memory


def key_batches(n: int) -> Iterator[list[bytes]]:
    while n > 0:
        size = min(n, BATCH)
        blob = os.urandom(16 * size)
        yield [blob[i : i + 16] for i in range(0, 16 * size, 16)]
        n -= size


def rate(check: Callable[[bytes], object], batch: list[bytes]) -> float:
    """Checks per second of ``check`` over ``batch``."""
    gc.disable()
    try:
        started = time.perf_counter()
        for key in batch:
            check(key)
        return len(batch) / (time.perf_counter() - started)
    finally:
        gc.enable()


def speed_row(name: str, check: Callable[[bytes], object], convert=None) -> dict[str, Any]:
    """Best of 3: rate on 100k new keys, then on the same keys again (already seen)."""
    new, seen = 0.0, 0.0
    for _ in range(3):  # best of 3: the machine is shared, the minimum time is the signal
        batch = next(key_batches(BATCH // 2))
        if convert is not None:
            batch = [convert(key) for key in batch]
        new = max(new, rate(check, batch))
        seen = max(seen, rate(check, batch))
    return {"name": name, "new_per_s": new, "seen_per_s": seen}


def set_checker(seen: set) -> Callable[[object], bool]:
    def check(fp: object) -> bool:  # RFPDupeFilter.request_seen without the fingerprinting
        if fp in seen:
            return True
        seen.add(fp)
        return False

    return check


def set_bytes_per_url(n: int, make: Callable[[bytes], object]) -> float:
    """Memory of a set of n fingerprints (objects included), per URL, by tracemalloc."""
    n = min(n, 1_000_000)  # per-URL cost is flat; tracemalloc is slow
    batches = list(key_batches(n))
    gc.collect()
    tracemalloc.start()
    seen = set()
    for batch in batches:
        seen.update(make(key) for key in batch)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current / len(seen)


def sha1(key: bytes) -> bytes:
    return hashlib.sha1(key).digest()


def sha1_hex(key: bytes) -> str:
    return hashlib.sha1(key).hexdigest()


def fp_row(name: str, df: BitmapDupeFilter, n: int, tested: int) -> dict[str, Any]:
    """Insert n keys, then test ``tested`` fresh ones without setting them."""
    started = time.perf_counter()
    for batch in key_batches(n):
        for key in batch:
            df.seen_fingerprint(key)
    fill_s = time.perf_counter() - started
    bitset = df.bitset
    hits = 0
    for batch in key_batches(tested):
        hits += sum(1 for key in batch if key in bitset)
    return {
        "name": name,
        "urls": n,
        "m": bitset.m,
        "k": bitset.k,
        "measured_fp": hits / tested,
        "theory_fp": theoretical_fp_rate(n, bitset.m, bitset.k),
        "estimated_fp": bitset.estimated_fp_rate,
        "fill_s": fill_s,
    }


def pybloom_fp_row(n: int, tested: int) -> dict[str, Any]:
    from pybloom_live import BloomFilter

    bf = BloomFilter(capacity=n, error_rate=RATE)
    for batch in key_batches(n):
        for key in batch:
            bf.add(key)
    hits = 0
    for batch in key_batches(tested):
        hits += sum(1 for key in batch if key in bf)
    return {
        "name": "pybloom-live",
        "urls": n,
        "m": bf.num_bits,
        "k": bf.num_slices,
        "measured_fp": hits / tested,
        "theory_fp": RATE,
    }


def snapshot_ms(df: BitmapDupeFilter) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        df.dir = Path(tmp)
        started = time.perf_counter()
        df.write_snapshot()
        elapsed = time.perf_counter() - started
        df.dir = None
    return elapsed * 1000


def gate_rate(df: BitmapDupeFilter) -> float:
    """fingerprint_url + seen_fingerprint per link, on links already seen (the common case)."""
    from larbinscrapy.urls import fingerprint_url

    urls = [f"http://h{i % 97}.test/dir{i % 13}/page{i}.html?b={i}&a=1" for i in range(50_000)]
    seen = df.seen_fingerprint
    for url in urls:
        seen(fingerprint_url(url))
    started = time.perf_counter()
    for url in urls:
        seen(fingerprint_url(url))
    return len(urls) / (time.perf_counter() - started)


def run(n: int, pybloom_urls: int) -> dict[str, Any]:
    from pybloom_live import BloomFilter

    clock = Clock()
    bitmap = BitmapDupeFilter(bits=LARBIN_BITS, clock=clock)
    bloom = BitmapDupeFilter(mode="bloom", capacity=n, error_rate=RATE, clock=clock)
    journaled = BitmapDupeFilter(bits=LARBIN_BITS, clock=clock, path=tempfile.mkdtemp())
    journaled.open()  # JOBDIR mode: new keys are also appended to the journal buffer
    speed = [
        speed_row("bitmap (ours, 64M bits)", bitmap.seen_fingerprint),
        speed_row("bitmap (ours, 64M bits) + JOBDIR journal", journaled.seen_fingerprint),
        speed_row(f"bloom (ours, {n} @ 0.1%)", bloom.seen_fingerprint),
        speed_row(
            f"pybloom-live BloomFilter ({n} @ 0.1%)",
            BloomFilter(capacity=max(n, 2 * BATCH), error_rate=RATE).add,
        ),
        speed_row("set of SHA1 digests (RFPDupeFilter, 2.19)", set_checker(set()), sha1),
        speed_row("set of SHA1 hex (older Scrapy)", set_checker(set()), sha1_hex),
    ]
    journaled.close("finished")
    shutil.rmtree(journaled.dir)
    bloom_m = bloom.bitset.m
    memory = [
        {"name": "bitmap at 0.1%", "bytes_per_url": bitmap_bits_for(n, RATE) / 8 / n},
        {"name": "bitmap, larbin's 8 MB", "bytes_per_url": LARBIN_BITS / 8 / n},
        {"name": "bloom (ours) at 0.1%", "bytes_per_url": bloom_m / 8 / n},
        {
            "name": "pybloom-live at 0.1%",
            "bytes_per_url": BloomFilter(capacity=n, error_rate=RATE).num_bits / 8 / n,
        },
        {
            "name": "set of SHA1 digests (RFPDupeFilter)",
            "bytes_per_url": set_bytes_per_url(n, sha1),
        },
        {"name": "set of SHA1 hex", "bytes_per_url": set_bytes_per_url(n, sha1_hex)},
    ]
    tested = min(n, 1_000_000)
    fresh_bitmap = BitmapDupeFilter(bits=LARBIN_BITS, clock=clock)
    fresh_bloom = BitmapDupeFilter(mode="bloom", capacity=n, error_rate=RATE, clock=clock)
    fp = [
        fp_row("bitmap (64M bits)", fresh_bitmap, n, tested),
        fp_row("bloom (0.1%)", fresh_bloom, n, tested),
    ]
    if pybloom_urls:
        fp.append(pybloom_fp_row(pybloom_urls, min(pybloom_urls, tested)))
    snapshots = {
        "bitmap_64M_ms": snapshot_ms(fresh_bitmap),
        f"bloom_{n}_ms": snapshot_ms(fresh_bloom),
    }
    return {
        "urls": n,
        "python": sys.version.split()[0],
        "speed": speed,
        "memory": memory,
        "false_positives": fp,
        "snapshot": snapshots,
        "gate_links_per_s": gate_rate(fresh_bitmap),
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"### Dupefilter structures, {result['urls']:,} URLs (Python {result['python']})",
        "",
        "| structure | new keys / s | seen keys / s |",
        "|---|---:|---:|",
    ]
    for row in result["speed"]:
        lines.append(f"| {row['name']} | {row['new_per_s']:,.0f} | {row['seen_per_s']:,.0f} |")
    lines += ["", "| memory | bytes per URL |", "|---|---:|"]
    for row in result["memory"]:
        lines.append(f"| {row['name']} | {row['bytes_per_url']:.2f} |")
    lines += [
        "",
        "| false positives | URLs | m bits | k | measured | theory | fill estimate |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["false_positives"]:
        lines.append(
            f"| {row['name']} | {row['urls']:,} | {row['m']:,} | {row['k']} |"
            f" {row['measured_fp']:.5f} | {row['theory_fp']:.5f} |"
            f" {row.get('estimated_fp', math.nan):.5f} |"
        )
    lines += ["", "| snapshot write (tmp, fsync, rename) | ms |", "|---|---:|"]
    for name, ms in result["snapshot"].items():
        lines.append(f"| {name} | {ms:.1f} |")
    lines += ["", f"Link gate (fingerprint_url + seen): {result['gate_links_per_s']:,.0f} links/s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000, help="URLs inserted (1M, 10M)")
    parser.add_argument(
        "--pybloom-urls",
        type=int,
        default=200_000,
        help="URLs for pybloom-live's false-positive run (it is slow); 0 skips it",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    # The undersized-bitmap warning is expected here (64M bits for 1M URLs at 0.1%).
    logging.getLogger("larbinscrapy").setLevel(logging.ERROR)
    result = run(args.urls, args.pybloom_urls)
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
