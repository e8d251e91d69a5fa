"""Benchmark LarbinScheduler against Scrapy's default scheduler: rates, RSS, resume time.

    python benchmarks/bench_scheduler.py [--requests 200000] [--queued 1000000 10000000]
                                         [--json PATH]

1. ``enqueue_request`` / ``next_request`` rates for ``--requests`` requests over 5,000 hosts,
   ours (JOBDIR on, dupefilter included) and Scrapy's ``Scheduler`` with a JOBDIR (disk queues,
   ``RFPDupeFilter``, ``ScrapyPriorityQueue``: the default DownloaderAwarePriorityQueue needs a
   running engine), each in a fresh subprocess so peak RSS is its own.
2. Overflow (``--overflow``): records written per URL queued when sites exceed their cap, on
   one host with 100,000 links and on 12 hosts of 1,000 URLs, with the engine asking for a
   request 20 times per fetch while every IP is busy (``larbin/frontier/to_wait`` +
   ``enqueued``, over ``enqueued``), and the wall time of the whole drain.
3. ``--overflow-queued``: 10M URLs over 100 hosts pushed, then all sequenced, so nearly all
   wait in the overflow FIFO with their ids in memory (the worst case for RSS), then resume.
4. Ours filled to ``--queued`` URLs (records pushed straight into the normal tier, as
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

    from settings import base

    values = {k: getattr(base, k) for k in dir(base) if k.isupper()}
    values.update(settings)
    crawler = get_crawler(BenchSpider, values)
    crawler.spider = BenchSpider.from_crawler(crawler)
    return crawler


def _url(i: int, hosts: int = HOSTS) -> str:
    return f"http://h{i % hosts:05d}.bench/dir/page-{i:09d}.html"


def run_rates(kind: str, n: int, jobdir: str) -> dict:
    """enqueue then dequeue ``n`` requests; runs in its own process."""
    from scrapy import Request
    from scrapy.utils.misc import build_from_crawler, load_object

    settings = {
        "JOBDIR": jobdir,
        "DOWNLOAD_DELAY": 0,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 10**6,
        "LARBIN_FRONTIER_LOADED_SITES_MAX": HOSTS,
    }
    if kind == "scrapy":
        settings.update(
            {
                "SCHEDULER": "scrapy.core.scheduler.Scheduler",
                # the default DownloaderAwarePriorityQueue needs a running engine
                "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
                "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
                "REQUEST_FINGERPRINTER_CLASS": "scrapy.utils.request.RequestFingerprinter",
            }
        )
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
    return {
        "kind": kind,
        "n": n,
        "dequeued": got,
        "enqueue_per_s": n / enqueue,
        "dequeue_per_s": got / dequeue if dequeue else 0.0,
        "peak_rss_mib": _rss_mib(),
    }


def _fill(sched, crawler, n: int, hosts: int) -> float:
    """Push ``n`` records straight into the normal tier, as ``enqueue_request`` writes them;
    return pushes per second."""
    from scrapy import Request

    from larbinscrapy.frontier import codec
    from larbinscrapy.frontier.scheduler import NORMAL

    template = codec.encode(
        Request(_url(0, hosts), meta={"depth": 1, "larbin_site_depth": 1}), crawler.spider
    )
    prefix = _url(0, hosts).encode()
    push = sched.fifos[NORMAL].push
    start = time.perf_counter()
    for i in range(n):
        push(template.replace(prefix, _url(i, hosts).encode(), 1))
    return n / (time.perf_counter() - start)


def _reopen(settings: dict):
    """A new scheduler on the same JOBDIR: (scheduler, open s, open to first request s)."""
    from larbinscrapy.frontier.scheduler import LarbinScheduler

    crawler = _crawler(settings)
    sched = LarbinScheduler.from_crawler(crawler)
    start = time.perf_counter()
    sched.open(crawler.spider)
    opened = time.perf_counter() - start
    first = sched.next_request()
    return sched, first, opened, time.perf_counter() - start


def run_queued(n: int, jobdir: str) -> dict:
    """Fill our frontier to ``n`` queued URLs, then measure RSS and resume."""
    from larbinscrapy.frontier.scheduler import LarbinScheduler

    settings = {"JOBDIR": jobdir, "DOWNLOAD_DELAY": 0}
    crawler = _crawler(settings)
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    fill = _fill(sched, crawler, n, HOSTS)
    rss_filled = _rss_mib()
    assert len(sched) == n
    sched.close("shutdown")
    sched2, first, opened, first_request = _reopen(settings)
    queued = len(sched2) + (first is not None)
    return {
        "queued": n,
        "fill_per_s": fill,
        "peak_rss_filled_mib": rss_filled,
        "resume_open_s": opened,
        "resume_first_request_s": first_request,
        "queued_after_resume": queued,
        "peak_rss_mib": _rss_mib(),
    }


def run_queued_overflow(n: int, hosts: int, jobdir: str) -> dict:
    """``n`` URLs over a few ``hosts``, all sequenced: nearly all wait in the overflow FIFO,
    their ids in memory (the worst case for RSS). Then close and resume."""
    from larbinscrapy.frontier.scheduler import LarbinScheduler

    settings = {"JOBDIR": jobdir, "DOWNLOAD_DELAY": 0}
    crawler = _crawler(settings)
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    _fill(sched, crawler, n, hosts)
    start = time.perf_counter()
    sched._refill(sched.table.clock(), budget=n)  # every record to its site or its overflow
    sched.flush()
    sequence = time.perf_counter() - start
    overflowed = sum(len(s.overflow or ()) for s in sched.sites.values())
    rss = _rss_mib()
    assert len(sched) == n
    sched.close("shutdown")
    sched2, first, opened, first_request = _reopen(settings)
    return {
        "queued": n,
        "hosts": hosts,
        "overflowed": overflowed,
        "sequence_s": sequence,
        "peak_rss_sequenced_mib": rss,
        "resume_open_s": opened,
        "resume_first_request_s": first_request,
        "queued_after_resume": len(sched2) + (first is not None),
    }


def run_overflow(hosts: int, per_host: int, jobdir: str) -> dict:
    """Queue ``hosts * per_host`` URLs, then fetch them all while the engine keeps polling."""
    from scrapy import Request, signals

    from larbinscrapy import signals as larbin_signals
    from larbinscrapy.frontier.scheduler import LarbinScheduler

    settings = {
        "JOBDIR": jobdir,
        "DOWNLOAD_DELAY": 0,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "LARBIN_DUPEFILTER_CAPACITY": 2 * hosts * per_host,
    }
    crawler = _crawler(settings)
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    for i in range(per_host):
        for h in range(hosts):
            sched.enqueue_request(Request(f"http://o{h:02d}.bench/p?id={i}"))
    start = time.perf_counter()
    fetched = 0
    while True:
        batch = list(iter(sched.next_request, None))
        for _ in range(20):  # every IP is busy: the engine asks again and again
            sched.next_request()
        if not batch:
            break
        for r in batch:
            crawler.signals.send_catch_log(
                signals.request_left_downloader, request=r, spider=crawler.spider
            )
            crawler.signals.send_catch_log(larbin_signals.request_done, request=r)
        fetched += len(batch)
    elapsed = time.perf_counter() - start
    stats = crawler.stats
    enqueued = stats.get_value("larbin/frontier/enqueued", 0)
    moved = stats.get_value("larbin/frontier/to_wait", 0)
    sched.close("finished")
    return {
        "hosts": hosts,
        "per_host": per_host,
        "fetched": fetched,
        "enqueued": enqueued,
        "to_wait": moved,
        "writes_per_url": (enqueued + moved) / enqueued,
        "drain_s": elapsed,
        "peak_rss_mib": _rss_mib(),
    }


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if out.returncode:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=200_000)
    p.add_argument("--queued", type=int, nargs="*", default=[1_000_000, 10_000_000])
    p.add_argument(
        "--overflow",
        nargs="*",
        default=["1x100000", "12x1000"],
        help="HOSTSxURLS cases of sites over their cap",
    )
    p.add_argument(
        "--overflow-queued",
        nargs="*",
        default=["100x10000000"],
        help="HOSTSxURLS: URLs queued on few hosts, sequenced into the overflow",
    )
    p.add_argument("--json")
    p.add_argument("--child", choices=("larbin", "scrapy", "queued", "overflow", "overflow-queued"))
    p.add_argument("--n", type=int)
    p.add_argument("--dir")
    a = p.parse_args()
    if a.child == "overflow-queued":
        hosts, n = (int(x) for x in a.overflow_queued[0].split("x"))
        print(json.dumps(run_queued_overflow(n, hosts, a.dir)))
        return
    if a.child == "overflow":
        hosts, per_host = (int(x) for x in a.overflow[0].split("x"))
        print(json.dumps(run_overflow(hosts, per_host, a.dir)))
        return
    if a.child:
        result = run_queued(a.n, a.dir) if a.child == "queued" else run_rates(a.child, a.n, a.dir)
        print(json.dumps(result))
        return
    results: dict = {"rates": [], "queued": [], "overflow": [], "overflow_queued": []}
    with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
        for kind in ("larbin", "scrapy"):
            results["rates"].append(
                _child(["--child", kind, "--n", str(a.requests), "--dir", f"{tmp}/{kind}"])
            )
        for case in a.overflow:
            results["overflow"].append(
                _child(["--child", "overflow", "--overflow", case, "--dir", f"{tmp}/o{case}"])
            )
        for case in a.overflow_queued:
            results["overflow_queued"].append(
                _child(
                    [
                        "--child",
                        "overflow-queued",
                        "--overflow-queued",
                        case,
                        "--dir",
                        f"{tmp}/oq{case}",
                    ]
                )
            )
        for n in a.queued:
            results["queued"].append(
                _child(["--child", "queued", "--n", str(n), "--dir", f"{tmp}/q{n}"])
            )
    print(f"### Scheduler, {a.requests:,} requests over {HOSTS:,} hosts, JOBDIR on\n")
    print("| scheduler | enqueue_request/s | next_request/s | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for r in results["rates"]:
        name = "LarbinScheduler" if r["kind"] == "larbin" else "Scrapy Scheduler (disk queues)"
        print(
            f"| {name} | {r['enqueue_per_s']:,.0f} | {r['dequeue_per_s']:,.0f} | "
            f"{r['peak_rss_mib']:.0f} |"
        )
    print(
        "\n| LarbinScheduler with N queued | fill/s | peak RSS MiB | open (resume) s |"
        " first request s |"
    )
    print("|---:|---:|---:|---:|---:|")
    for r in results["queued"]:
        print(
            f"| {r['queued']:,} | {r['fill_per_s']:,.0f} | {r['peak_rss_filled_mib']:.0f} | "
            f"{r['resume_open_s']:.3f} | {r['resume_first_request_s']:.3f} |"
        )
    print(
        "\n| sites over the cap | URLs | records moved to wait | records written per URL |"
        " drain s | peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in results["overflow"]:
        print(
            f"| {r['hosts']} x {r['per_host']:,} | {r['enqueued']:,} | {r['to_wait']:,} | "
            f"{r['writes_per_url']:.2f} | {r['drain_s']:.2f} | {r['peak_rss_mib']:.0f} |"
        )
    print(
        "\n| queued on few hosts, sequenced | in overflow | sequence s | peak RSS MiB |"
        " open (resume) s | first request s |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for r in results["overflow_queued"]:
        print(
            f"| {r['queued']:,} over {r['hosts']} hosts | {r['overflowed']:,} | "
            f"{r['sequence_s']:.1f} | {r['peak_rss_sequenced_mib']:.0f} | "
            f"{r['resume_open_s']:.3f} | {r['resume_first_request_s']:.3f} |"
        )
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
