"""A crawl stopped at a point chosen from the server's log (not from a timer), and the checks of
two runs of the same ``JOBDIR`` against the ground truth."""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import TYPE_CHECKING, Any

from tests.support.crawl import ROOT, Crawl, crawl_command, seeds_args

if TYPE_CHECKING:
    from collections import Counter
    from pathlib import Path

    from testweb.harness import RunningWeb


def run_until(
    web: RunningWeb,
    out: Path,
    settings: dict[str, Any],
    after_requests: int,
    sig: int,
    timeout: float = 120,
) -> Crawl:
    """Start the crawl; once the server has logged ``after_requests`` more requests, ``sig``."""
    out.mkdir(parents=True, exist_ok=True)
    log_start = len(web.read_log())
    cmd = crawl_command(web, out, *seeds_args(web.seeds), settings=settings)
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=err,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + timeout
        try:
            while len(web.read_log()) - log_start < after_requests:
                if proc.poll() is not None:
                    raise AssertionError(
                        "the crawl ended before it could be stopped:\n"
                        + (out / "stderr.log").read_text()[-3000:]
                    )
                if time.monotonic() > deadline:
                    raise AssertionError("the crawl is too slow to reach the stop point")
                time.sleep(0.02)
            proc.send_signal(sig)
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stats_path = out / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    return Crawl(
        proc.returncode, (out / "stderr.log").read_text(), [], stats, web.read_log()[log_start:]
    )


def error_pages(web: RunningWeb) -> set[str]:
    """Pages the retry middleware fetches twice in one run (RETRY_TIMES=1)."""
    return {u for u, page in web.web.pages.items() if page.status >= 500}


def check_resumed(web: RunningWeb, first: Crawl, second: Crawl) -> Counter[str]:
    """Both runs together fetched exactly the ground truth; return how often each URL was."""
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats["finish_reason"] == "finished"
    truth = web.web.ground_truth(web.seeds, depth=5)
    assert first.fetched(web.port) | second.fetched(web.port) == truth
    # both runs did part of the work: the stop really happened mid-crawl
    assert first.fetched(web.port) and second.fetched(web.port) - first.fetched(web.port)
    counts = first.fetch_counts(web.port) + second.fetch_counts(web.port)
    for url in error_pages(web) & set(counts):
        counts[url] -= 1  # the retry's second fetch is the crawl's rule, not a duplicate
    return counts


def twice(counts: Counter[str]) -> dict[str, int]:
    """The URLs counted more than once."""
    return {u: n for u, n in counts.items() if n > 1}
