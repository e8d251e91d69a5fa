"""Paired before/after: the baseline checkout and this one crawl two identical webs at once.

    python -m benchmarks.ab --baseline DIR [--hosts 50] [--pages 1000] [--reps 4] [--json PATH]

Why: on this shared 2-core machine a crawl's CPU per page drifts by 10-25% from one minute to
the next (measured: the same checkout at 0.87, 1.12 and 0.95 ms/page on the large web within
15 minutes), so alternating runs need many pairs to see a 5-10% change. Run at the same time,
both crawls meet the same drift, and the per-pair ratio keeps only the difference between the
checkouts: four simultaneous pairs gave 1.20, 1.10, 1.10, 1.10 where four alternating pairs of
the same two checkouts gave 1.23, 0.93, 0.97, 0.90. Each pair runs on two webs generated from
the same seed (same pages, links, dead addresses), one nginx each; the checkouts swap webs
every repetition. The two compete for the two cores, so absolute figures are above a lone
crawl's: compare the ratio, and take the absolute figures from ``benchmarks.run``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks import peers
from benchmarks.run import Scenario, crawl_once
from testweb.synthweb import SynthWeb

logger = logging.getLogger(__name__)

PAIR = ("baseline", "larbin")


def paired_runs(
    hosts: int, pages: int, reps: int, work: Path, timeout: float = 1800.0
) -> list[dict[str, Any]]:
    """``reps`` pairs of simultaneous crawls; each pair's two results and when each ran."""
    sc = Scenario("ab", hosts, pages, 0.0, reps, 8, 100, startup=False)
    pairs = []
    with (
        SynthWeb(hosts, pages, workdir=str(work / "web-1")) as one,
        SynthWeb(hosts, pages, workdir=str(work / "web-2")) as two,
    ):
        for rep in range(reps):
            webs = (one, two) if rep % 2 == 0 else (two, one)

            def crawl(crawler: str, web: SynthWeb, rep: int = rep) -> dict[str, Any]:
                own = work / crawler  # its own seeds file: the twin webs' ports differ
                own.mkdir(exist_ok=True)
                started = time.time()
                result = crawl_once(crawler, sc, web, own, rep, timeout)
                return result | {"started": started, "ended": time.time(), "port": web.port}

            with ThreadPoolExecutor(len(PAIR)) as pool:
                futures = [pool.submit(crawl, c, w) for c, w in zip(PAIR, webs, strict=True)]
                before, after = (f.result() for f in futures)
            ratio = (
                before["cpu_ms_per_page"] / after["cpu_ms_per_page"]
                if before["cpu_ms_per_page"] and after["cpu_ms_per_page"]
                else None
            )
            pairs.append({"rep": rep, "baseline": before, "larbin": after, "ratio": ratio})
            logger.info(
                "pair %d: baseline %.3f, larbinscrapy %.3f ms/page: %s",
                rep + 1,
                before["cpu_ms_per_page"] or 0,
                after["cpu_ms_per_page"] or 0,
                f"{ratio:.3f}" if ratio else "-",
            )
    return pairs


def summary(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of each side's CPU per page and of the per-pair ratios (> 1: this checkout wins)."""
    ok = [
        p
        for p in pairs
        if p["ratio"] is not None and p["baseline"]["status"] == p["larbin"]["status"] == "ok"
    ]
    if not ok:
        return {"pairs": len(pairs), "ok_pairs": 0}
    return {
        "pairs": len(pairs),
        "ok_pairs": len(ok),
        "ratio_median": statistics.median(p["ratio"] for p in ok),
        "ratios": [round(p["ratio"], 3) for p in ok],
        "baseline_ms_per_page": statistics.median(p["baseline"]["cpu_ms_per_page"] for p in ok),
        "larbin_ms_per_page": statistics.median(p["larbin"]["cpu_ms_per_page"] for p in ok),
        "baseline_rss_mb": statistics.median(p["baseline"]["maxrss_mb"] for p in ok),
        "larbin_rss_mb": statistics.median(p["larbin"]["maxrss_mb"] for p in ok),
    }


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--baseline", required=True, help="checkout of larbinscrapy to compare with")
    p.add_argument("--hosts", type=int, default=50)
    p.add_argument("--pages", type=int, default=1000, help="pages per host")
    p.add_argument("--reps", type=int, default=4, help="simultaneous pairs")
    p.add_argument("--json", help="write the pairs and the summary here")
    args = p.parse_args(argv)
    os.environ[peers.BASELINE_ENV] = args.baseline
    for crawler in PAIR:
        if (problem := peers.missing(crawler)) is not None:
            print(f"benchmarks.ab: {problem}", file=sys.stderr)
            return 2
        peers.compile_bytecode(crawler)
    with tempfile.TemporaryDirectory(prefix="larbin-ab-") as tmp:
        pairs = paired_runs(args.hosts, args.pages, args.reps, Path(tmp))
    result = summary(pairs)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"pairs": pairs, "summary": result}, indent=2, default=str)
        )
    return 0 if result["ok_pairs"] == len(pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
