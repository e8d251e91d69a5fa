"""A silent host on a shared address (issue 35, point 5): it must not hold the address's other
hosts for its full ``DOWNLOAD_TIMEOUT``, try after try.

On the simulated internet at 1,000 hosts the crawl spent 300 of its 369 s waiting: five hosts that
accept a connection and never answer sat on shared-hosting addresses, and each held its
address's only connection (``LARBIN_IP_CONNECTIONS = 1``) for 30 s, again for the retry, again
for its other site (http and https) and again when robots.txt was read again, while every other
name there waited. A host never heard from now gets ``LARBIN_HOST_SILENT_TIMEOUT`` for its first
answer, and one that stays silent is set aside: its other URLs are dropped (``silent``) at no
cost to the address.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.marks import require_crawl_marker
from testweb.internet.analyze import analyze
from testweb.internet.harness import InternetThread
from testweb.internet.logs import read_web
from testweb.internet.model import Internet, Mix

if TYPE_CHECKING:
    from testweb.internet.model import Host

ROOT = Path(__file__).resolve().parents[1]
BASE = "127.42.0.0"
# one silent host (h16) on a shared address with 12 live hosts, 117 pages in all; plain http,
# robots allow all: the silent host is what is under test
SEED = 35
MIX = Mix(0, 0, 0, 0, 0, 0, 0, 0.05, 0, 0, (("allow", 1.0),))
TIMEOUT = 30.0  # DOWNLOAD_TIMEOUT: what a silent host cost before, per try
SILENT = 2.0  # LARBIN_HOST_SILENT_TIMEOUT


def _crawl(net: Internet, work: Path, hosts: list[Host]) -> dict[str, float]:
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(net.seeds()) + "\n")
    settings = {
        "LARBIN_RESOLVE": json.dumps({h.name: h.addresses[0] for h in hosts}),
        "LARBIN_ALLOWED_NETWORKS": "127.42.0.0/16",
        "DOWNLOAD_DELAY": 0,
        "DOWNLOAD_TIMEOUT": TIMEOUT,
        "LARBIN_HOST_SILENT_TIMEOUT": SILENT,
        "LARBIN_DEPTH": 1000,
        "LARBIN_SITEMAPS": False,
        "LARBIN_STATS_FILE": work / "stats.json",
        "LOG_LEVEL": "INFO",
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin", "-a", f"seeds={seeds}"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    with open(work / "crawl.log", "w") as log:
        subprocess.run(
            cmd,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=240,
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    stats: dict[str, float] = json.loads((work / "stats.json").read_text())
    return stats


@pytest.mark.crawl
def test_a_silent_host_holds_its_shared_address_once_and_briefly(tmp_path: Path) -> None:
    require_crawl_marker("a crawl of the simulated internet")
    net = Internet(40, seed=SEED, base=BASE, mix=MIX, http_port=0, https_port=0)
    hosts = [net.host(i) for i in range(net.hosts)]
    silent = [h for h in hosts if h.tarpit]
    assert len(silent) == 1
    address = silent[0].addresses[0]
    neighbours = [h for h in hosts if h.addresses == (address,) and not h.tarpit]
    assert len(neighbours) >= 10
    with InternetThread(net, tmp_path / "internet", latency=False):
        stats = _crawl(net, tmp_path, hosts)
    web = read_web(str(tmp_path / "internet" / "web.log"))
    report = analyze(net, net.seeds(), web, [])
    # every live host's pages, the neighbours' among them
    assert report["coverage"] == 1.0 and report["host_coverage"] == 1.0, report
    assert report["fetched_twice"] == 0, report
    # the silent host was asked once (its robots.txt): no retry, no second site, no re-read
    asked = [e for e in web if e.host == silent[0].name]
    assert [(e.path, e.status) for e in asked] == [("/robots.txt", 0)], asked
    # and held its address for LARBIN_HOST_SILENT_TIMEOUT, not DOWNLOAD_TIMEOUT
    at_address = [e.t for e in web if e.ip == address]
    longest = max(b - a for a, b in pairwise(at_address))
    assert longest < TIMEOUT / 2, f"the address waited {longest:.1f} s"
    assert stats.get("larbin/host/silent") == 1, stats
    assert stats.get("larbin/dropped/silent", 0) >= 1, stats  # its own pages, at no cost
