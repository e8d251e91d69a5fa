"""Our crawl of the simulated internet (``testweb/internet``) at N hosts, with real DNS.

``python -m benchmarks.bench_internet --hosts 1000 [--latency] [--seed 1]`` (root: it makes a
network namespace, ``--netns`` names it): serves ``python -m testweb.internet`` inside a fresh
namespace whose resolv.conf points at the simulated DNS server (port 53), runs ``scrapy crawl
larbin`` of its seeds there with the ordinary system resolver (no ``LARBIN_RESOLVE``) and the
test CA trusted, and prints one JSON document: CPU ms a page, pages/s, peak RSS, most open fds,
and the analyzer's report (coverage against the generator's truth, DNS queries per host,
politeness at the server; with latency, the requests in flight at the server). ``--latency``
adds a 30 ms median DNS answer delay and 100 ms median time to first byte. A crawl is stopped
when the server has logged nothing for ``--stall`` seconds (reported as ``stopped: stalled``)
or after ``--timeout``. Figures go to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testweb.internet.analyze import analyze, load
from testweb.internet.dns import dns_address
from testweb.internet.harness import InternetProcess, crawl_command, run_watched
from testweb.internet.netns import Namespace

if TYPE_CHECKING:
    from testweb.internet.logs import WebEntry
    from testweb.internet.model import Internet

REPO = Path(__file__).resolve().parent.parent
BASE = "127.100.0.0"


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (the simulated internet's server)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_flight(internet: Internet, web: list[WebEntry], until: float) -> dict[str, float]:
    """Requests waiting for their first byte at the server, from its log and each host's time
    to first byte (the generator's): the mean over the crawl up to ``until``, the most at once,
    and the most at once on one IP and on one host (politeness: ``LARBIN_IP_CONNECTIONS``, one
    a host)."""
    events: list[tuple[float, int, str, str]] = []
    for e in web:
        if e.t > until:
            break
        host = internet.host_of(e.host)
        if host is not None and host.ttfb > 0:
            events += [(e.t, 1, e.ip, e.host), (e.t + host.ttfb, -1, e.ip, e.host)]
    events.sort(key=lambda ev: (ev[0], ev[1]))  # an end before a start at the same instant
    level = most = 0
    area, last = 0.0, web[0].t if web else 0.0
    per: dict[str, int] = {}
    most_ip = most_host = 0
    for t, step, ip, name in events:
        area += level * (min(t, until) - last)
        last = min(t, until)
        level += step
        most = max(most, level)
        at_ip = per[ip] = per.get(ip, 0) + step
        at_host = per["host:" + name] = per.get("host:" + name, 0) + step
        most_ip, most_host = max(most_ip, at_ip), max(most_host, at_host)
    return {
        "in_flight_mean": round(area / max(1e-9, until - (web[0].t if web else 0.0)), 1),
        "in_flight_max": most,
        "in_flight_per_ip_max": most_ip,
        "in_flight_per_host_max": most_host,
    }


def bench(
    hosts: int,
    seed: int,
    latency: bool,
    work: Path,
    timeout: float,
    stall: float,
    extra: list[str],
    netns: str | None = None,
) -> dict[str, Any]:
    """One crawl of a fresh simulated internet; the figures and the analyzer's report."""
    logdir = work / "internet"
    args = [
        "--hosts",
        str(hosts),
        "--seed",
        str(seed),
        "--base",
        BASE,
        "--write-seeds",
        str(logdir / "seeds.txt"),
    ]
    if latency:
        args += ["--dns-ms", "30", "--ttfb-ms", "100"]
    logdir.mkdir(parents=True, exist_ok=True)
    with (
        Namespace(dns_address(BASE), name=netns) as ns,
        InternetProcess(logdir, args, netns=ns) as net,
    ):
        env = {**os.environ, "PYTHONPATH": str(REPO), "SSL_CERT_FILE": net.ca}
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        cmd = ns.command(crawl_command(logdir / "seeds.txt", work, extra))
        result = run_watched(cmd, env, work, logdir / "web.log", timeout, stall)
        result["server_cpu_s"] = _cpu_s(net.proc.pid)
    internet, seeds, web, dns = load(logdir)
    report = analyze(internet, seeds, web, dns)
    page_times = sorted(
        e.t for e in web if e.status == 200 and e.path not in ("/robots.txt", "/sitemap.xml")
    )
    pages = len(page_times)
    # the crawl's tail (a few hosts with hundreds of pages, one connection each) is long: the
    # time to 95% of the pages says how fast the bulk went
    t95 = (page_times[int(pages * 0.95) - 1] - web[0].t) if pages >= 20 else None
    # one host's pages come one at a time (a connection a host): with latency, the largest
    # host alone sets the end; half the pages says how fast the crawl goes while the work is
    # spread over many hosts (what latency hiding is about)
    t50 = (page_times[int(pages * 0.5) - 1] - web[0].t) if pages >= 20 else None
    result.update(
        {
            "hosts": hosts,
            "seed": seed,
            "latency": latency,
            "requests": len(web),
            "pages": pages,
            "cpu_ms_per_page": round(result["cpu_s"] * 1000 / max(1, pages), 3),
            "pages_per_s": round(pages / result["wall_s"], 1),
            "to_95pct_pages_s": round(t95, 1) if t95 else None,
            "pages_per_s_to_95pct": round(0.95 * pages / t95, 1) if t95 else None,
            "to_50pct_pages_s": round(t50, 1) if t50 else None,
            "pages_per_s_to_50pct": round(0.5 * pages / t50, 1) if t50 else None,
            "dns_queries_per_host": round(len(dns) / hosts, 3),
            "server_cpu_ms_per_request": round(result["server_cpu_s"] * 1000 / max(1, len(web)), 3),
            "report": report,
        }
    )
    if latency and t95:
        result.update(in_flight(internet, web, web[0].t + t95))
    stats = work / "stats.json"
    if stats.exists():
        got = json.loads(stats.read_text())
        result["stats"] = {
            k: v for k, v in got.items() if k.startswith(("larbin/dns", "larbin/dropped"))
        }
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_internet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--hosts", type=int, action="append", help="repeatable (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latency", action="store_true", help="30 ms DNS, 100 ms to first byte")
    p.add_argument("--both", action="store_true", help="without, then with latency")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--stall", type=float, default=60, help="stop after this long without a request")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument("--netns", default=None, help="the namespace's name (default internet-<pid>)")
    p.add_argument(
        "-s", dest="settings", action="append", default=[], help="KEY=VALUE for the crawl"
    )
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-internet-"))
    results = []
    for hosts in args.hosts or [1000]:
        for latency in (False, True) if args.both else (args.latency,):
            run_dir = work / f"h{hosts}-{'lat' if latency else 'nolat'}"
            run_dir.mkdir(parents=True, exist_ok=True)
            result = bench(
                hosts,
                args.seed,
                latency,
                run_dir,
                args.timeout,
                args.stall,
                args.settings,
                f"{args.netns}-{len(results)}" if args.netns else None,
            )
            results.append(result)
            print(json.dumps(result), flush=True)
    (work / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
