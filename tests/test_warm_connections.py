"""A host's pages sent while its connection is warm (#35, point 4): where the server keeps an
idle connection alive longer than the host's delay, a crawl opens at most 1.3 connections a host
on average, counted by the server, with every page fetched once and every host's delay held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from tests.support.marks import require_crawl_marker
from testweb import manyhosts
from testweb.harness import launch

pytestmark = pytest.mark.timing  # gaps to the millisecond at the server: make test runs it alone

ROOT = Path(__file__).resolve().parents[1]
FIRST_IP = "127.40.0.1"  # the conn helper's loopback range (127.40.0.0/16)
SLACK = 0.001  # the server's log keeps 0.1 ms
LATENCY = 0.05  # the server's wait before each answer
FIXED = {"LARBIN_FETCH_IN_FLIGHT_MAX": 0}  # 4 requests at once, not grown (tests/test_in_flight.py)


def crawl_many_hosts(
    tmp_path: Path,
    *,
    hosts: int,
    pages: int,
    server: tuple[str, ...],
    settings: dict[str, object],
) -> tuple[int, str, dict, list, int]:
    """Serve the many-host web (10 names an address; ``server``: more of its arguments), crawl
    it with JOBDIR; (exit code, log, stats, the server's request log, port)."""
    require_crawl_marker("a crawl subprocess")
    proc, info, _ = launch(
        tmp_path / "web",
        [
            "testweb.manyhosts",
            *("--hosts", str(hosts), "--pages", str(pages), "--first-ip", FIRST_IP),
            *("--hosts-per-ip", "10", *server),
        ],
    )
    try:
        port = info["port"]
        seeds, env = manyhosts.write_crawl_files(tmp_path / "crawl", hosts, FIRST_IP, 10, port)
        out = tmp_path / "out"
        out.mkdir()
        cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin", "-a", f"seeds={seeds}"]
        for key, value in {
            "JOBDIR": tmp_path / "job",
            "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8",
            "LARBIN_STATS_FILE": out / "stats.json",
            "LOG_LEVEL": "INFO",
            "LARBIN_STATUS_PORT": 0,
            **settings,
        }.items():
            cmd += ["-s", f"{key}={value}"]
        with open(out / "crawl.log", "w") as log:
            crawl = subprocess.run(
                cmd,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                timeout=600,
                check=False,
            )
        stats_path = out / "stats.json"
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        text = (out / "crawl.log").read_text(errors="replace")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    records = manyhosts.read_log(tmp_path / "web" / "testweb-log.jsonl")
    return crawl.returncode, text, stats, records, port


def shortest_gaps(records: list[tuple[float, int, str, str]]) -> dict[str, float]:
    """Per host, the shortest time between two requests' arrivals at the server."""
    times: dict[str, list[float]] = defaultdict(list)
    for t, _, host, _ in records:
        times[host].append(t)
    gaps = {k: [b - a for a, b in pairwise(sorted(ts))] for k, ts in times.items()}
    return {k: min(g) for k, g in gaps.items() if g}


@pytest.mark.crawl
def test_a_hosts_pages_go_over_its_warm_connection(tmp_path: Path) -> None:
    """More hosts than the crawl fetches in a keep-alive (50 ms before each answer, 4 requests
    at once: at most 80 pages/s, 200 hosts): fetched in the order their links were found, a
    host's next page came after every other host's, on a new connection each time."""
    hosts, pages, delay = 200, 5, 0.2
    code, log, stats, records, port = crawl_many_hosts(
        tmp_path,
        hosts=hosts,
        pages=pages,
        server=("--keepalive", "1.5", "--latency", str(LATENCY)),  # idle 1.5 s, past the delay
        settings={"DOWNLOAD_DELAY": delay, "LARBIN_IP_DELAY": 0, "CONCURRENT_REQUESTS": 4, **FIXED},
    )
    assert code == 0, log[-4000:]
    assert stats.get("finish_reason") == "finished", stats
    summary = manyhosts.summary(records, port)
    missing = manyhosts.ground_truth(hosts, pages, port) - summary["pages"]
    assert not missing, f"{len(missing)} pages never fetched, e.g. {sorted(missing)[:5]}"
    assert summary["twice"] == 0
    too_close = {h: g for h, g in shortest_gaps(records).items() if g < delay - SLACK}
    assert too_close == {}, "a host's delay broken at the server"
    assert summary["connections_per_host"] <= 1.3, summary["connections_per_host"]


@pytest.mark.crawl
def test_a_sites_sitemap_goes_over_its_warm_connection(tmp_path: Path) -> None:
    """One page a host (a broad crawl's shape), sitemaps on (the default), 4 requests at once:
    a site's ``/sitemap.xml`` waited for the reader's turns, came well after the site's page
    and robots.txt, past the server's keep-alive, on a new connection. Read on the page's
    lease right after robots.txt, it goes over the connection robots.txt opened."""
    hosts, delay = 200, 0.0  # no delay: a broad crawl's (the file waits for none)
    code, log, stats, records, port = crawl_many_hosts(
        tmp_path,
        hosts=hosts,
        pages=1,
        server=("--keepalive", "1.5", "--latency", str(LATENCY)),  # idle 1.5 s
        settings={"DOWNLOAD_DELAY": delay, "LARBIN_IP_DELAY": 0, "CONCURRENT_REQUESTS": 4, **FIXED},
    )
    assert code == 0, log[-4000:]
    assert stats.get("finish_reason") == "finished", stats
    summary = manyhosts.summary(records, port)
    missing = manyhosts.ground_truth(hosts, 1, port) - summary["pages"]
    assert not missing, f"{len(missing)} pages never fetched, e.g. {sorted(missing)[:5]}"
    assert summary["twice"] == 0
    sitemaps = Counter(host for _, _, host, path in records if path == "/sitemap.xml")
    assert len(sitemaps) == hosts and set(sitemaps.values()) == {1}, "each sitemap asked once"
    # no host delay: one request at a time a host, the next after the previous one's answer
    too_close = {h: g for h, g in shortest_gaps(records).items() if g < LATENCY - SLACK}
    assert too_close == {}, "two requests out at once on one host"
    assert summary["connections_per_host"] <= 1.1, summary["connections_per_host"]
