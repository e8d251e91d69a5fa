"""Benchmark the revisit store (1M and 10M pages) and the bytes conditional GET saves.

    python benchmarks/bench_revisit.py [--pages 1000000 10000000] [--redis-pages 100000]
                                       [--crawl-seconds 12] [--json PATH]

1. Store, each size in a fresh subprocess (so peak RSS is its own): ``add()`` of N pages (URL of
   ~50 bytes, an ETag, a Last-Modified) due over 30 days, a checkpoint every 100,000 adds (what
   one second of a fast crawl writes between checkpoints); then bytes on disk, peak RSS, the time
   to open the store again (the resume a crawl pays) and to take the next 10,000 due pages out
   of the oldest buckets (``take_due``), and ``done()`` (rescheduling) per second.
2. The distributed schedule (``RedisRevisitStore``) in a real redis-server: ``add`` and ``take``
   rates for ``--redis-pages`` pages (one script call each, as a worker makes them) and Redis's
   memory per scheduled page (``used_memory`` before and after); then the check a revisit
   request makes before its fetch (``in_flight``, one ``ZSCORE``) for each page taken.
3. Conditional GET on the changing test web (``testweb/changing.py``) over a real revisiting
   crawl of ``--crawl-seconds``: body bytes the server sent, against what the same requests
   would have cost without validators (every 304 replaced by the page's full body: what a plain
   Scrapy re-crawl, which sends no validators, transfers).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DAY = 86400.0
CHECKPOINT_EVERY = 100_000
TAKE = 10_000


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _disk(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


def run_store(n: int, directory: str) -> dict:
    """Fill a store with ``n`` pages, reopen it, take due pages; runs in its own process."""
    from larbinscrapy.parse.urls import fingerprint_url
    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.store import RevisitStore

    now = 1_800_000_000.0
    store = RevisitStore(directory, 300.0, clock=lambda: now)
    store.open()
    started = time.perf_counter()
    state = 0
    for i in range(n):
        url = f"http://h{i % 50_000:05d}.bench/dir/page-{i:09d}.html"
        entry = Entry(
            fingerprint_url(url),
            url,
            now + (i * 7919 % n) / n * 30 * DAY,
            DAY,
            etag=f'"{i:x}-5f2e"'.encode(),
            last_modified=1_700_000_000,
        )
        state = entry.state_size()
        store.add(entry)
        if i % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
            store.checkpoint()
    store.checkpoint()
    add_seconds = time.perf_counter() - started
    rss_filled = _rss_mib()
    store.close()
    disk = _disk(Path(directory))
    started = time.perf_counter()
    again = RevisitStore(directory, 300.0, clock=lambda: now)
    again.open()
    open_seconds = time.perf_counter() - started
    started = time.perf_counter()
    due = again.take_due(now + 3600.0, TAKE)  # the first hour of due pages, 10,000 at most
    take_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for entry in due:
        again.done(entry.evolve(due=entry.due + 2 * DAY, fetch_count=2))
    done_seconds = time.perf_counter() - started
    again.close()
    return {
        "pages": n,
        "state_bytes_per_page": state,
        "add_per_s": n / add_seconds,
        "disk_bytes": disk,
        "disk_bytes_per_page": disk / n,
        "peak_rss_mib": _rss_mib(),
        "rss_after_fill_mib": rss_filled,
        "open_s": open_seconds,
        "take_due": len(due),
        "take_due_s": take_seconds,
        "done_per_s": len(due) / done_seconds if done_seconds else 0.0,
    }


def run_redis(n: int, tmp: Path) -> dict:
    """``RedisRevisitStore`` add/take rates and memory per page in a fresh redis-server."""
    import redis

    from larbinscrapy.parse.urls import fingerprint_url
    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.redis_store import RedisRevisitStore
    from tests.support.redisserver import redis_server

    now = 1_800_000_000.0
    with redis_server(tmp / "redis") as url:
        server = redis.Redis.from_url(url)
        base = server.info("memory")["used_memory"]
        store = RedisRevisitStore(server, "bench:revisit", inflight=TAKE)
        started = time.perf_counter()
        for i in range(n):
            page = f"http://h{i % 50_000:05d}.bench/dir/page-{i:09d}.html"
            store.add(
                Entry(
                    fingerprint_url(page),
                    page,
                    now + (i * 7919 % n) / n * 30 * DAY,
                    DAY,
                    etag=f'"{i:x}-5f2e"'.encode(),
                    last_modified=1_700_000_000,
                )
            )
        add_seconds = time.perf_counter() - started
        memory = server.info("memory")["used_memory"] - base
        started = time.perf_counter()
        _, _, taken = store.take(now + 30 * DAY, lease=3600.0)
        take_seconds = time.perf_counter() - started
        # the check each revisit request makes before its fetch (a stale copy is dropped)
        started, cpu = time.perf_counter(), time.process_time()
        held = sum(store.in_flight(entry) for entry in taken)
        check_seconds, check_cpu = time.perf_counter() - started, time.process_time() - cpu
        server.close()
    return {
        "pages": n,
        "add_per_s": n / add_seconds,
        "memory_bytes_per_page": memory / n,
        "take": len(taken),
        "take_s": take_seconds,
        "checks": len(taken),
        "checks_held": held,
        "check_ms": check_seconds / max(1, len(taken)) * 1000,
        "check_cpu_ms": check_cpu / max(1, len(taken)) * 1000,
    }


def run_conditional_get(seconds: float, tmp: Path) -> dict:
    """A revisiting crawl of the changing web; body bytes sent vs. without validators."""
    from tests.support.crawl import run_crawl, seeds_args
    from tests.test_revisit import RULE
    from testweb.changing import REVISIT_HOSTS, start_changing

    with start_changing(tmp / "web") as web:
        crawl = run_crawl(
            web,
            tmp / "out",
            *seeds_args(web.seeds),
            settings={**RULE, "CLOSESPIDER_TIMEOUT": seconds},
            timeout=seconds + 60,
        )
    full: dict[str, int] = {}
    for r in crawl.requests:
        if r["status"] == 200:
            full[r["host"] + r["path"]] = r["bytes"]
    pages = [r for r in crawl.requests if r["host"] in REVISIT_HOSTS and r["path"] != "/robots.txt"]
    sent = sum(r["bytes"] for r in pages)
    without = sum(
        full.get(r["host"] + r["path"], 0) if r["status"] == 304 else r["bytes"] for r in pages
    )
    n304 = sum(r["status"] == 304 for r in pages)
    return {
        "requests": len(pages),
        "not_modified": n304,
        "body_bytes_sent": sent,
        "body_bytes_without_validators": without,
        "bytes_saved": without - sent,
        "saved_share": (without - sent) / without if without else 0.0,
        "response_bytes_stat": crawl.stats.get("downloader/response_bytes"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--redis-pages", type=int, default=100_000)
    parser.add_argument("--crawl-seconds", type=float, default=12.0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(run_store(args.one, args.dir)))
        return 0
    results: dict = {"store": []}
    for n in args.pages:
        with tempfile.TemporaryDirectory(prefix="bench-revisit-") as d:
            out = subprocess.run(
                [sys.executable, __file__, "--one", str(n), "--dir", d],
                capture_output=True,
                text=True,
                check=True,
            )
        row = json.loads(out.stdout)
        results["store"].append(row)
        print(
            f"{n:>11,} pages: add {row['add_per_s']:,.0f}/s, state {row['state_bytes_per_page']}"
            f" B/page, disk {row['disk_bytes_per_page']:.1f} B/page"
            f" ({row['disk_bytes'] / 2**20:,.0f} MiB), peak RSS {row['peak_rss_mib']:.0f} MiB,"
            f" open {row['open_s']:.3f} s, take {row['take_due']:,} due in"
            f" {row['take_due_s'] * 1000:.1f} ms, done {row['done_per_s']:,.0f}/s",
            flush=True,
        )
    with tempfile.TemporaryDirectory(prefix="bench-revisit-redis-") as d:
        rd = run_redis(args.redis_pages, Path(d))
    results["redis"] = rd
    print(
        f"Redis schedule, {rd['pages']:,} pages: add {rd['add_per_s']:,.0f}/s,"
        f" {rd['memory_bytes_per_page']:.0f} bytes of Redis memory per page,"
        f" take {rd['take']:,} due (one script) in {rd['take_s'] * 1000:.0f} ms;"
        f" the check before a revisit's fetch {rd['check_ms']:.3f} ms wall,"
        f" {rd['check_cpu_ms']:.3f} ms CPU ({rd['checks_held']:,} of {rd['checks']:,} held)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-revisit-crawl-") as d:
        cg = run_conditional_get(args.crawl_seconds, Path(d))
    results["conditional_get"] = cg
    print(
        f"conditional GET, {args.crawl_seconds:.0f} s crawl: {cg['requests']} requests,"
        f" {cg['not_modified']} answered 304; body bytes {cg['body_bytes_sent']:,} against"
        f" {cg['body_bytes_without_validators']:,} without validators:"
        f" {cg['bytes_saved']:,} saved ({cg['saved_share']:.0%})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
