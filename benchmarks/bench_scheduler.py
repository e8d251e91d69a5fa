"""Benchmark LarbinScheduler against Scrapy's default scheduler: rates, RSS, resume time.

    python benchmarks/bench_scheduler.py [--requests 200000] [--queued 1000000 10000000]
                                         [--json PATH]

1. ``enqueue_request`` / ``next_request`` rates for ``--requests`` requests over 5,000 hosts,
   ours (JOBDIR on, dupefilter included) and Scrapy's ``Scheduler`` with a JOBDIR (disk queues,
   ``RFPDupeFilter``, ``ScrapyPriorityQueue``: the default DownloaderAwarePriorityQueue needs a
   running engine), each in a fresh subprocess so peak RSS is its own.
2. Ours filled to ``--queued`` URLs (records pushed straight into the normal tier, as
   ``enqueue_request`` writes them, so 10M does not take 10M ``Request()`` calls), then peak RSS,
   close, and the time to open again (the resume a crawl pays) and hand out the first request.
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

HOSTS = 5000


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _crawler(settings: dict):
    from scrapy import Spider
    from scrapy.utils.reactor import install_reactor
    from scrapy.utils.test import get_crawler

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

    class BenchSpider(Spider):
        name = "bench"

    import settings.base as base

    values = {k: getattr(base, k) for k in dir(base) if k.isupper()}
    values.update(settings)
    crawler = get_crawler(BenchSpider, values)
    crawler.spider = BenchSpider.from_crawler(crawler)
    return crawler


def _url(i: int) -> str:
    return f"http://h{i % HOSTS:05d}.bench/dir/page-{i:09d}.html"


def run_rates(kind: str, n: int, jobdir: str) -> dict:
    """enqueue then dequeue ``n`` requests; runs in its own process."""
    from scrapy import Request
    from scrapy.utils.misc import build_from_crawler, load_object

    settings = {"JOBDIR": jobdir, "DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 10**6,
                "LARBIN_LOADED_SITES": HOSTS}
    if kind == "scrapy":
        settings.update({"SCHEDULER": "scrapy.core.scheduler.Scheduler",
                         # the default DownloaderAwarePriorityQueue needs a running engine
                         "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
                         "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
                         "REQUEST_FINGERPRINTER_CLASS":
                             "scrapy.utils.request.RequestFingerprinter"})
    crawler = _crawler(settings)
    sched = build_from_crawler(load_object(crawler.settings["SCHEDULER"]), crawler)
    sched.open(crawler.spider)
    requests = [Request(_url(i)) for i in range(n)]
    start = time.perf_counter()
    for r in requests:
        sched.enqueue_request(r)
    enqueue = time.perf_counter() - start
    del requests
    start = time.perf_counter()
    got = 0
    while sched.next_request() is not None:
        got += 1
    dequeue = time.perf_counter() - start
    sched.close("finished")
    return {"kind": kind, "n": n, "dequeued": got, "enqueue_per_s": n / enqueue,
            "dequeue_per_s": got / dequeue if dequeue else 0.0, "peak_rss_mib": _rss_mib()}


def run_queued(n: int, jobdir: str) -> dict:
    """Fill our frontier to ``n`` queued URLs, then measure RSS and resume."""
    from scrapy import Request

    from larbinscrapy.frontier import codec
    from larbinscrapy.frontier.scheduler import NORMAL, LarbinScheduler

    settings = {"JOBDIR": jobdir, "DOWNLOAD_DELAY": 0}
    crawler = _crawler(settings)
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    template = codec.encode(Request(_url(0), meta={"depth": 1, "larbin_site_depth": 1}),
                            crawler.spider)
    prefix = _url(0).encode()
    push = sched.fifos[NORMAL].push
    start = time.perf_counter()
    for i in range(n):
        push(template.replace(prefix, _url(i).encode(), 1))
    fill = time.perf_counter() - start
    rss_filled = _rss_mib()
    assert len(sched) == n
    sched.close("shutdown")
    crawler2 = _crawler(settings)
    sched2 = LarbinScheduler.from_crawler(crawler2)
    start = time.perf_counter()
    sched2.open(crawler2.spider)
    opened = time.perf_counter() - start
    first = sched2.next_request()
    first_request = time.perf_counter() - start
    queued = len(sched2) + (first is not None)
    return {"queued": n, "fill_per_s": n / fill, "peak_rss_filled_mib": rss_filled,
            "resume_open_s": opened, "resume_first_request_s": first_request,
            "queued_after_resume": queued, "peak_rss_mib": _rss_mib()}


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=False, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200_000)
    p.add_argument("--queued", type=int, nargs="*", default=[1_000_000, 10_000_000])
    p.add_argument("--json")
    p.add_argument("--child", choices=("larbin", "scrapy", "queued"))
    p.add_argument("--n", type=int)
    p.add_argument("--dir")
    a = p.parse_args()
    if a.child:
        result = (run_queued(a.n, a.dir) if a.child == "queued" else run_rates(a.child, a.n, a.dir))
        print(json.dumps(result))
        return
    results: dict = {"rates": [], "queued": []}
    with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
        for kind in ("larbin", "scrapy"):
            results["rates"].append(_child(["--child", kind, "--n", str(a.requests),
                                            "--dir", f"{tmp}/{kind}"]))
        for n in a.queued:
            results["queued"].append(_child(["--child", "queued", "--n", str(n),
                                             "--dir", f"{tmp}/q{n}"]))
    print(f"### Scheduler, {a.requests:,} requests over {HOSTS:,} hosts, JOBDIR on\n")
    print("| scheduler | enqueue_request/s | next_request/s | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for r in results["rates"]:
        name = "LarbinScheduler" if r["kind"] == "larbin" else "Scrapy Scheduler (disk queues)"
        print(f"| {name} | {r['enqueue_per_s']:,.0f} | {r['dequeue_per_s']:,.0f} | "
              f"{r['peak_rss_mib']:.0f} |")
    print("\n| LarbinScheduler with N queued | fill/s | peak RSS MiB | open (resume) s |"
          " first request s |")
    print("|---:|---:|---:|---:|---:|")
    for r in results["queued"]:
        print(f"| {r['queued']:,} | {r['fill_per_s']:,.0f} | {r['peak_rss_filled_mib']:.0f} | "
              f"{r['resume_open_s']:.3f} | {r['resume_first_request_s']:.3f} |")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
