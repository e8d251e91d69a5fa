"""The frontier's IP rotation (``IpRing``): CPU a site served, one site an IP or thousands.

    python -m benchmarks.bench_ring [--base OTHER_CHECKOUT] [--reps 2]

Serves every site of ``IPS x PER_IP`` (two URLs each) as the scheduler does (added, picked,
its fetch ended, emptied), each shape in a fresh process of each tree, alternated: the CPU a
site served. Shared hosting puts thousands of names on an address, and a broad crawl keeps tens
of thousands of sites in memory, most on those addresses.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

SHAPES = ((5000, 1), (5, 2000), (5, 8000))

CHILD = """
import sys, time
sys.path.insert(0, {tree!r})
from larbinscrapy.frontier.sites import IpRing, Site, READY
from tests.support.cores import ManualClock, ip_table
ips, per_ip = {ips}, {per_ip}
clock = ManualClock(); table = ip_table(0.0, 8, clock=clock); ring = IpRing(table)
sites = []
for i in range(ips * per_ip):
    ip = f"10.0.{{i % ips // 256}}.{{i % ips % 256}}"
    s = Site(f"s{{i}}", f"s{{i}}", state=READY, ip=ip)
    s.queue.append((0, i, b"r")); s.queue.append((0, i, b"r")); sites.append(s)
t = time.process_time()
for s in sites:
    ring.add_site(s)
served = 0
while (picked := ring.next_ready(clock.now)) is not None:
    st, site = picked
    del site.queue[0]
    if not site.queue:
        ring.site_emptied(site)
    site.out += 1; table.acquire(st); table.finish(st, release=True, failed=False); site.out -= 1
    ring.released(st, site.host); ring.place(st.ip)
    if site.queue:
        ring.add_site(site)
    served += 1; clock.now += 0.0001
print((time.process_time() - t) / served * 1e6)
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_ring", description=__doc__)
    p.add_argument("--base", type=Path, default=None, help="another checkout, run first")
    p.add_argument("--reps", type=int, default=2)
    args = p.parse_args(argv)
    trees = [*([args.base.resolve()] if args.base else []), Path(__file__).resolve().parents[1]]
    print("| tree | IPs x sites each | CPU µs a site served (each run) |")
    print("|---|---|---|")
    for ips, per_ip in SHAPES:
        for tree in trees:
            runs = [
                subprocess.run(
                    [sys.executable, "-c", CHILD.format(tree=str(tree), ips=ips, per_ip=per_ip)],
                    cwd=tree,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
                for _ in range(args.reps)
            ]
            shown = ", ".join(f"{float(r):.1f}" for r in runs)
            print(f"| {tree.name} | {ips:,} x {per_ip:,} | {shown} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
