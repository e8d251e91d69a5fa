"""Many virtual hosts on one IP: host- and IP-level politeness, plain Scrapy side by side.

    python -m benchmarks.bench_shared_ip [--vhosts 20] [--pages 4] [--delay 1.0]
                                         [--ip-delay 0.1] [--reps 1] [--json PATH]

The web (``testweb.polite``) has ``--vhosts`` hostnames ``vNN.bench`` on 127.0.9.1 and 4
one-host IPs, ``--pages`` pages each. Three crawls of it, the server's request log as judge:

* plain Scrapy (``benchmarks/plain_spider.py``): a download slot per hostname, so
  ``DOWNLOAD_DELAY`` per host and nothing per IP;
* larbinscrapy by IP only, as before issue #15: ``LARBIN_IP_DELAY`` = ``DOWNLOAD_DELAY``;
* larbinscrapy, both levels: ``DOWNLOAD_DELAY`` per host, ``LARBIN_IP_DELAY`` per IP.

Reported per crawl: host-level violations (gaps between two requests to one hostname shorter
than ``DOWNLOAD_DELAY``), IP-level violations (gaps on one IP shorter than ``--ip-delay``), the
shared IP's requests per second, its efficiency against the IP limit (``(n - 1) * ip_delay``
over the time from its first request to its last), wall time and CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testweb import polite
from testweb.harness import gaps_by_host, gaps_by_ip

REPO = Path(__file__).resolve().parent.parent
PLAIN_SPIDER = Path(__file__).resolve().parent / "plain_spider.py"
SHARED = "127.0.9.1"
TOLERANCE = 0.001


def web_hosts(vhosts: int, pages: int) -> dict[str, dict[str, Any]]:
    hosts = {f"v{i:02d}.bench": {"ip": SHARED, "pages": pages} for i in range(vhosts)}
    hosts.update({f"solo{i}.bench": {"ip": f"127.0.9.{i + 2}", "pages": pages} for i in range(4)})
    return hosts


def command(
    crawler: str, web: polite.RunningPolite, work: Path, delay: float, ip_delay: float
) -> tuple[list[str], dict[str, str]]:
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(web.seeds) + "\n")
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    resolve = json.dumps(web.resolve)
    if crawler == "plain":
        return [
            sys.executable,
            str(PLAIN_SPIDER),
            "--seeds-file",
            str(seeds),
            "--resolve",
            resolve,
            "--out",
            str(work / "items.jsonl"),
            "--delay",
            str(delay),
            "-s",
            "RANDOMIZE_DOWNLOAD_DELAY=False",
        ], env
    env["PYTHONPATH"] = str(REPO)
    return [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        f"seeds={seeds}",
        "-s",
        f"LARBIN_RESOLVE={resolve}",
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        f"DOWNLOAD_DELAY={delay}",
        "-s",
        f"LARBIN_IP_DELAY={ip_delay}",
        "-s",
        "LOG_LEVEL=INFO",
        "-O",
        str(work / "items.jsonl"),
    ], env


def measure(log: list[dict[str, Any]], delay: float, ip_delay: float) -> dict[str, Any]:
    host_bad = sum(g < delay - TOLERANCE for gaps in gaps_by_host(log).values() for g in gaps)
    ip_bad = sum(g < ip_delay - TOLERANCE for gaps in gaps_by_ip(log).values() for g in gaps)
    shared = sorted(e["t"] for e in log if e["ip"] == SHARED)
    span = shared[-1] - shared[0] if len(shared) > 1 else 0.0
    return {
        "requests": len(log),
        "pages_ok": sum(e["status"] == 200 for e in log),
        "host_violations": host_bad,
        "ip_violations": ip_bad,
        "shared_ip_requests": len(shared),
        "shared_ip_span_s": round(span, 2),
        "shared_ip_req_per_s": round((len(shared) - 1) / span, 2) if span else None,
        "shared_ip_efficiency": round((len(shared) - 1) * ip_delay / span, 3) if span else None,
    }


def crawl(
    crawler: str,
    web: polite.RunningPolite,
    work: Path,
    delay: float,
    ip_delay: float,
    judge_ip_delay: float,
) -> dict[str, Any]:
    """One crawl with ``ip_delay`` as its setting, judged against ``judge_ip_delay``."""
    work.mkdir(parents=True, exist_ok=True)
    cmd, env = command(crawler, web, work, delay, ip_delay)
    start_log = len(web.read_log())
    start = time.perf_counter()
    with open(work / "stderr.log", "wb") as err:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    result = measure(web.read_log()[start_log:], delay, judge_ip_delay)
    return {
        "crawler": crawler,
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 2),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 2),
        **result,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--vhosts", type=int, default=20)
    p.add_argument("--pages", type=int, default=4)
    p.add_argument("--delay", type=float, default=1.0, help="DOWNLOAD_DELAY (per host)")
    p.add_argument("--ip-delay", type=float, default=0.1, help="LARBIN_IP_DELAY")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    runs: list[dict[str, Any]] = []
    configs = (
        ("plain", args.delay, args.ip_delay),  # ip_delay only judges plain's IP gaps
        ("larbin-ip-only", args.delay, args.delay),
        ("larbin", args.delay, args.ip_delay),
    )
    with (
        tempfile.TemporaryDirectory(prefix="bench-shared-ip-") as tmp,
        polite.start(Path(tmp, "web"), web_hosts(args.vhosts, args.pages)) as web,
    ):
        for rep in range(args.reps):
            for name, delay, ip_delay in configs:
                crawler = "plain" if name == "plain" else "larbin"
                # every crawl judged against the same limits: what both levels allow
                run = crawl(
                    crawler, web, Path(tmp, f"{name}-{rep}"), delay, ip_delay, args.ip_delay
                )
                runs.append({"config": name, "rep": rep, **run})
                print(json.dumps(runs[-1]), flush=True)
    print(
        "| crawl | host violations | IP violations | shared IP req/s | IP-limit efficiency "
        "| wall s | CPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, _, _ in configs:
        mine = [r for r in runs if r["config"] == name]

        def med(key: str, mine: list[dict[str, Any]] = mine) -> Any:
            values = [r[key] for r in mine if r[key] is not None]
            return round(statistics.median(values), 3) if values else None

        print(
            f"| {name} | {med('host_violations')} | {med('ip_violations')} | "
            f"{med('shared_ip_req_per_s')} | {med('shared_ip_efficiency')} | "
            f"{med('wall_s')} | {med('cpu_s')} |"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json)}, "runs": runs}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
