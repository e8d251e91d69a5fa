"""Benchmark SegmentFifo: push, pop and ack rates, checkpoint and resume time, peak RSS.

    python benchmarks/bench_frontier_fifo.py [--records 1000000] [--json PATH] [--dir DIR]

Records are ~100 bytes (a serialised request's size), taken from a small pool so the loop
measures the FIFO and not record building. The run: push N and flush; checkpoint with N queued;
close; reopen without the state file (every segment scanned and CRC-checked: the worst case);
reopen (the resume a crawl pays); pop N; ack N; checkpoint again (deletes every segment);
close. Then ``read_at``: push N/10 records, read them back by id in a shuffled order (what a
crowded site's overflow costs when the site has room again) and ack them. Peak RSS is
``ru_maxrss`` of this process, which holds no record list.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from larbinscrapy.frontier.segments import SegmentFifo

logger = logging.getLogger(__name__)


def _records(pool: int = 1024, size: int = 100) -> list[bytes]:
    """Distinct ~100-byte records shaped like a compact serialised request."""
    out = []
    for i in range(pool):
        head = b"https://h%04d.example.test/dir/page-%06d.html\x00d=3\x00p=0\x00cb=parse\x00" % (
            i % 97,
            i,
        )
        out.append((head + b"m" * size)[:size])
    return out


def _rss_mib() -> float:
    """Peak resident set size so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed(label: str, results: dict[str, float], func, *args):
    start = time.perf_counter()
    value = func(*args)
    results[label] = time.perf_counter() - start
    return value


def _push(fifo: SegmentFifo, n: int, pool: list[bytes]) -> None:
    push = fifo.push
    mask = len(pool) - 1
    for i in range(n):
        push(pool[i & mask])
    fifo.flush()


def _pop(fifo: SegmentFifo, n: int) -> int:
    pop = fifo.pop
    total = 0
    for _ in range(n):
        total += len(pop()[1])  # type: ignore[index]
    return total


def _ack(fifo: SegmentFifo, n: int) -> None:
    ack = fifo.ack
    for rid in range(n):  # one uninterrupted run of full segments: rids are 0..n-1
        ack(rid)
    fifo.flush()


def _read_at(fifo: SegmentFifo, n: int, pool: list[bytes]) -> float:
    """Records per second read back by id (random order), as a site's overflow is."""
    import random

    mask = len(pool) - 1
    placed = []
    for i in range(n):
        rid = fifo.push(pool[i & mask])
        placed.append((rid, fifo.last_offset))
    fifo.flush()
    random.Random(1).shuffle(placed)
    start = time.perf_counter()
    for rid, offset in placed:
        if fifo.read_at(rid, offset) is None:
            raise RuntimeError(f"record {rid} did not read back")
        fifo.ack(rid)
    return n / (time.perf_counter() - start)


def run(records: int, directory: Path) -> dict[str, float]:
    pool = _records()
    t: dict[str, float] = {}
    rss_start = _rss_mib()
    fifo = SegmentFifo(directory / "fifo")
    _timed("push", t, _push, fifo, records, pool)
    rss_queued = _rss_mib()
    _timed("checkpoint_queued", t, fifo.checkpoint)
    disk = sum(p.stat().st_size for p in (directory / "fifo").iterdir())
    _timed("close_queued", t, fifo.close)
    (directory / "fifo" / "state.json").unlink()  # worst case: every segment is scanned
    fifo = _timed("reopen_rescan", t, SegmentFifo, directory / "fifo")
    fifo.close()
    fifo = _timed("reopen", t, SegmentFifo, directory / "fifo")
    if len(fifo) != records:
        raise RuntimeError(f"reopened with {len(fifo)} records, expected {records}")
    nbytes = _timed("pop", t, _pop, fifo, records)
    _timed("ack", t, _ack, fifo, records)
    _timed("checkpoint_drained", t, fifo.checkpoint)
    fifo.close()
    if any((directory / "fifo").iterdir()):
        raise RuntimeError("an empty FIFO left files behind")
    fifo = SegmentFifo(directory / "fifo")
    read_at_per_s = _read_at(fifo, max(1, records // 10), pool)
    fifo.close()
    return {
        "records": records,
        "record_bytes": nbytes / records,
        "push_per_s": records / t["push"],
        "pop_per_s": records / t["pop"],
        "ack_per_s": records / t["ack"],
        "read_at_per_s": read_at_per_s,
        "checkpoint_queued_s": t["checkpoint_queued"],
        "checkpoint_drained_s": t["checkpoint_drained"],
        "reopen_s": t["reopen"],
        "reopen_rescan_s": t["reopen_rescan"],
        "disk_mib": disk / 2**20,
        "rss_start_mib": rss_start,
        "rss_peak_queued_mib": rss_queued,
        "rss_peak_mib": _rss_mib(),
    }


def _table(r: dict[str, float]) -> str:
    n = int(r["records"])
    rows = [
        ("push (buffered, then flush)", f"{r['push_per_s']:,.0f} records/s"),
        ("pop (chunked reads, CRC checked)", f"{r['pop_per_s']:,.0f} records/s"),
        ("ack (journaled, then flush)", f"{r['ack_per_s']:,.0f} acks/s"),
        ("read_at + ack, random order (a site's overflow)", f"{r['read_at_per_s']:,.0f} records/s"),
        (f"checkpoint with {n:,} queued", f"{r['checkpoint_queued_s'] * 1000:.1f} ms"),
        (
            "checkpoint after all acked (deletes segments)",
            f"{r['checkpoint_drained_s'] * 1000:.1f} ms",
        ),
        (f"reopen (resume) with {n:,} queued", f"{r['reopen_s'] * 1000:.1f} ms"),
        ("reopen without state.json (scans every segment)", f"{r['reopen_rescan_s']:.2f} s"),
        (f"segment files for {n:,} records", f"{r['disk_mib']:.1f} MiB"),
        ("peak RSS at start", f"{r['rss_start_mib']:.1f} MiB"),
        (f"peak RSS with {n:,} queued", f"{r['rss_peak_queued_mib']:.1f} MiB"),
        ("peak RSS, whole run", f"{r['rss_peak_mib']:.1f} MiB"),
    ]
    lines = [
        f"SegmentFifo, {n:,} records of {r['record_bytes']:.0f} bytes, Python "
        f"{sys.version.split()[0]}",
        "",
        "| measure | value |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-fifo-"))
    try:
        result = run(args.records, work)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    print(_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
        logger.info("wrote %s", os.fspath(args.json))


if __name__ == "__main__":
    main()
