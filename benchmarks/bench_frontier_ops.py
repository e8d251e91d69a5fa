"""Redis work per page of the shared frontier's lease path: pop, release, acknowledgement.

    python benchmarks/bench_frontier_ops.py [--hosts 20] [--pages 100] [--ips 20]

One process drives a ``RedisFrontier`` on a throwaway redis-server as a worker would, with no
crawl around it: ``--hosts`` x ``--pages`` URLs admitted (``--ips`` IPs, hosts spread over
them), then pop one record, release its IP (no delay: every host stays ready), acknowledge,
until the frontier is empty. Reported from ``INFO commandstats`` per page: the Redis commands
run (inside the scripts too) and the microseconds Redis spent in ``EVALSHA``. Figures that do
not depend on the machine's load (the command counts), unlike the crawl benchmarks.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_distributed import RedisProcess  # noqa: E402
from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter  # noqa: E402
from larbinscrapy.distributed.frontier import NORMAL, RedisFrontier  # noqa: E402
from larbinscrapy.parse.urls import fingerprint_url, host_of, site_of  # noqa: E402


def _stats(client) -> dict[str, tuple[int, int]]:
    """command -> (calls, usec) from ``INFO commandstats``."""
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
        for name, v in client.info("commandstats").items()
    }


def measure(hosts: int, pages: int, ips: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        redis_proc = RedisProcess(Path(tmp))
        try:
            return _run(redis_proc.client, hosts, pages, ips)
        finally:
            redis_proc.stop()


def _run(server, hosts: int, pages: int, ips: int) -> dict[str, float]:
    df = RedisBitmapDupeFilter(server, "b:seen", mode="bloom", capacity=hosts * pages * 2)
    f = RedisFrontier(server, "b:frontier", max_per_site=40, loaded_sites=2000)
    urls = [f"http://h{h}.test/p{p}.html" for h in range(hosts) for p in range(pages)]
    for i in range(0, len(urls), 500):
        f.admit(
            "w",
            df.key,
            0,
            [
                (
                    NORMAL,
                    df.positions(fingerprint_url(u)),
                    f.entry(site_of(u), host_of(u), f'["{u}",0]'.encode()),
                )
                for u in urls[i : i + 500]
            ],
        )
    for h in range(hosts):
        f.resolved(f"h{h}.test", f"10.9.{h % ips}.1")
    # the release's host arguments where the tree has them (this script also measures the
    # tree before them, for the before/after figures)
    host_args = "host" in inspect.signature(f.release_call).parameters
    before = _stats(server)
    done, lease = 0, 0
    while done < len(urls):
        popped = f.pop("w", 1, lease)
        if not popped.leases:
            if popped.wait is None and popped.queued == 0:
                break
            continue
        for lid, ip, record in popped.leases:
            lease += 1
            url = record.decode().split('"')[1]
            extra = {"host": host_of(url), "outcome": "a"} if host_args else {}
            f.release("w", ip, 0.0, **extra)
            f.admit("w", df.key, 0, [], [lid])
            done += 1
    after = _stats(server)
    calls = {k: after[k][0] - before.get(k, (0, 0))[0] for k in after}
    inner = sum(n for k, n in calls.items() if k not in ("evalsha", "eval", "info", "script|load"))
    evalsha_us = after["evalsha"][1] - before.get("evalsha", (0, 0))[1]
    return {
        "pages": done,
        "commands_per_page": inner / done,
        "scripts_per_page": calls.get("evalsha", 0) / done,
        "evalsha_us_per_page": evalsha_us / done,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--pages", type=int, default=100)
    p.add_argument("--ips", type=int, default=20)
    a = p.parse_args()
    r = measure(a.hosts, a.pages, a.ips)
    print(
        f"{r['pages']} pages, {a.hosts} hosts on {a.ips} IPs: "
        f"{r['commands_per_page']:.2f} Redis commands/page inside "
        f"{r['scripts_per_page']:.2f} scripts/page, "
        f"{r['evalsha_us_per_page']:.1f} us of EVALSHA/page"
    )


if __name__ == "__main__":
    main()
