"""The shared content-duplicate index in Redis: memory per kept page and checks per second.

    python benchmarks/bench_neardup.py [--pages 100000] [--distances 0,3,6] [--batch 500]

For each ``LARBIN_CONTENT_DUP_NEAR_DISTANCE`` (0: content hashes only, ``RedisContentDupPipeline``'s
``HSETNX`` script), a fresh ``redis-server`` keeps ``--pages`` distinct pages through the very
calls a worker sends (``first_url_call``, ``NearIndex.check_call``: one script per page,
pipelined ``--batch`` at a time, as the worker's Redis thread does under load). Pages have
random 16-byte content hashes and random 64-bit simhashes (the simhashes of unrelated pages
look random) and URLs of the synthetic web's shape. Memory is the ``INFO memory``
``used_memory`` delta per page; the near index's own share is the delta minus distance 0's.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_distributed import RedisProcess, synthetic_urls  # noqa: E402
from larbinscrapy.distributed.contentdup import RedisContentDupPipeline  # noqa: E402
from larbinscrapy.distributed.jobs import Call, run_calls  # noqa: E402
from larbinscrapy.distributed.neardup import Verdict  # noqa: E402


def one(rds: RedisProcess, pages: int, distance: int, batch: int) -> dict[str, Any]:
    rds.client.flushall()
    pipeline = RedisContentDupPipeline(rds.client, "bench:contentdup", near_distance=distance)
    rng = random.Random(distance)
    urls = synthetic_urls(pages)
    before = rds.used_memory()
    kept = 0
    started = time.perf_counter()
    for i in range(0, pages, batch):
        calls: list[Call] = []
        for url in urls[i : i + batch]:
            digest = rng.randbytes(16)
            if pipeline.near is None:
                calls.append(pipeline.first_url_call(digest, url))
            else:
                calls.append(
                    pipeline.near.check_call(pipeline.key, digest, url, rng.getrandbits(64) or 1)
                )
        kept += sum(r is None or r == Verdict("kept") for r in run_calls(rds.client, calls))
    seconds = time.perf_counter() - started
    return {
        "distance": distance,
        "pages": pages,
        "kept": kept,
        "bytes_per_page": (rds.used_memory() - before) / pages,
        "checks_per_s": pages / seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=100_000)
    parser.add_argument("--distances", default="0,3,6")
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        rds = RedisProcess(Path(work))
        try:
            rows = [one(rds, args.pages, int(d), args.batch) for d in args.distances.split(",")]
        finally:
            rds.stop()
    exact = next((r["bytes_per_page"] for r in rows if r["distance"] == 0), 0.0)
    print(f"{args.pages:,} pages kept, one redis-server, batches of {args.batch}\n")
    print(
        "| LARBIN_CONTENT_DUP_NEAR_DISTANCE | Redis bytes per kept page "
        "| of which the near index | checks/s (one client) | kept |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        share = r["bytes_per_page"] - exact if r["distance"] else 0.0
        print(
            f"| {r['distance']} | {r['bytes_per_page']:.0f} | {share:.0f} "
            f"| {r['checks_per_s']:,.0f} | {r['kept']:,} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
