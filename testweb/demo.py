"""``make demo``: start the bundled test web on loopback and crawl it with ``scrapy crawl larbin``.

A newcomer without internet sees a real crawl in under a minute: 11 virtual hosts on 10 loopback
IPs, robots.txt, redirects, duplicates, frames, a slow host. Items go to ``output/demo/items.jsonl``
and the crawl's stats to ``output/demo/stats.json``; at the end the crawl is compared with the
web's ground truth.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from testweb.harness import pages, start_web

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    out = ROOT / "output" / "demo"
    out.mkdir(parents=True, exist_ok=True)
    with start_web(out / "web", slow_delay=1.0) as web:
        print(f"test web: {len(web.hosts)} hostnames on {len(set(web.hosts.values()))} loopback "
              f"IPs, port {web.port}, seeds {' '.join(web.seeds)}")
        cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin",
               "-a", "urls=" + ",".join(web.seeds),
               "-s", "LARBIN_RESOLVE=" + json.dumps(web.resolve),
               "-s", "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",  # the SSRF guard refuses loopback
               "-s", "DOWNLOAD_DELAY=0.05",
               "-s", f"LARBIN_STATS_FILE={out / 'stats.json'}",
               "-O", str(out / "items.jsonl")]
        print("$", " ".join(cmd[1:3]), "crawl larbin -a urls=... -s LARBIN_RESOLVE=...", flush=True)
        started = time.monotonic()
        code = subprocess.call(cmd, cwd=ROOT)
        elapsed = time.monotonic() - started
        fetched = pages(web.read_log(), web.port)  # robots.txt and /sitemap.xml set apart
        truth = web.web.ground_truth(web.seeds, depth=5)
    items = (out / "items.jsonl").read_text().splitlines()
    print(f"\ncrawl exit code {code} in {elapsed:.1f} s: {len(fetched)} URLs fetched, "
          f"{len(items)} pages stored in {out / 'items.jsonl'} (duplicates dropped)")
    print(f"ground truth {len(truth)} URLs: missing {len(truth - fetched)}, "
          f"unexpected {len(fetched - truth)}")
    return code or int(fetched != truth)


if __name__ == "__main__":
    sys.exit(main())
