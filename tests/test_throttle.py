"""Politeness that listens, measured at the server (``testweb.polite``'s request log).

Throttling answers (429, 503 with Retry-After; delta-seconds, HTTP-date, none: the doubling
back-off), host and IP levels on an IP shared by 20 hostnames, the bandwidth cap, AutoThrottle
and the From header. Every crawl is a real ``scrapy crawl larbin``.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import statistics
import subprocess
import time
from collections import defaultdict
from contextlib import contextmanager
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.crawl import run_crawl, seeds_args
from tests.support.resume import run_until
from tests.support.workers import assert_clean_logs, start_worker, wait_workers
from testweb import polite
from testweb.harness import ROBOTS, SITEMAP, free_port, gaps_by_host, gaps_by_ip

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = [
    pytest.mark.crawl,  # subprocess crawls, outside servers: not in make test-fast
    pytest.mark.timing,  # gaps to the millisecond at the server: make test runs it alone
]

SLACK = 0.001
TINYPROXY = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"  # Makefile APT_PACKAGES


def _pages(requests: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    return [e for e in requests if e["host"] == host and e["path"] not in (ROBOTS, SITEMAP)]


def _fetched_ok(requests: list[dict[str, Any]], port: int) -> set[str]:
    return {f"http://{e['host']}:{port}{e['path']}" for e in requests if e["status"] == 200}


def test_retry_after_pauses_the_host_and_its_ip_and_the_pages_come_later(tmp_path):
    hosts = {
        "ra.test": {"ip": "127.0.5.1", "pages": 4, "throttle": 2, "retry_after": "3"},
        "rd.test": {
            "ip": "127.0.5.2",
            "pages": 3,
            "throttle": 1,
            "status": 503,
            "retry_after": "date:3",
        },
        "ra-vhost.test": {"ip": "127.0.5.1", "pages": 3},  # shares ra.test's IP
        "calm.test": {"ip": "127.0.5.3", "pages": 12},
    }
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": 0.3, "LARBIN_IP_DELAY": 0.1, "RETRY_TIMES": 0},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.requests
    assert _fetched_ok(log, web.port) == web.pages()  # nothing lost
    assert len(crawl.items) == len(web.pages())  # a throttling answer is not a page
    assert crawl.stats["larbin/throttled/429"] == 2
    assert crawl.stats["larbin/throttled/503"] == 1
    assert "retry/count" not in crawl.stats  # RETRY_TIMES is not used up
    # after each 429 of ra.test nothing reaches its IP (127.0.5.1) for 3 s
    throttled = [e["t"] for e in log if e["host"] == "ra.test" and e["status"] == 429]
    for t in throttled:
        later = [e["t"] - t for e in log if e["ip"] == "127.0.5.1" and e["t"] > t]
        assert later and min(later) >= 3.0 - SLACK, later
    # an HTTP-date is whole seconds: "3 s ahead" is at least 2 s
    t503 = next(e["t"] for e in log if e["host"] == "rd.test" and e["status"] == 503)
    assert min(e["t"] - t503 for e in log if e["ip"] == "127.0.5.2" and e["t"] > t503) >= 2.0
    # calm.test kept its rate meanwhile: most of its pages came during ra.test's 6 s of pause
    calm = [e["t"] for e in _pages(log, "calm.test")]
    assert sum(throttled[0] < t < throttled[0] + 6 for t in calm) >= 8
    assert "ra.test answered 429: pausing it and its IP 127.0.5.1 for 3.0 s" in crawl.stderr
    assert crawl.stderr.count("ra.test answered 429") == 1  # logged once per host


def test_without_retry_after_the_backoff_doubles(tmp_path):
    hosts = {"bo.test": {"ip": "127.0.5.4", "pages": 2, "throttle": 3}}
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": 0.1, "LARBIN_THROTTLE_BACKOFF": 0.5},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert _fetched_ok(crawl.requests, web.port) == web.pages()
    starts = [e["t"] for e in _pages(crawl.requests, "bo.test")]
    gaps = [b - a for a, b in pairwise(starts)][:3]  # after the 1st, 2nd and 3rd 429
    assert len(gaps) == 3
    for k, gap in enumerate(gaps):
        assert gap >= 0.5 * 2**k - SLACK, gaps
    assert crawl.stats["larbin/throttled/429"] == 3


def test_retry_after_past_the_cap_sets_the_host_aside(tmp_path):
    hosts = {
        "far.test": {"ip": "127.0.5.5", "pages": 3, "throttle": 1, "retry_after": "7200"},
        "near.test": {"ip": "127.0.5.5", "pages": 2},
    }
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": 0.1, "LARBIN_THROTTLE_RETRY_AFTER_MAX": 60},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["larbin/host/set_aside"] == 1
    assert crawl.stats["larbin/dropped/throttled"] == 1
    assert len(_pages(crawl.requests, "far.test")) == 1  # asked once, then left alone
    assert _fetched_ok(crawl.requests, web.port) == polite.page_urls(
        {"near.test": hosts["near.test"]}, web.port
    )


SHARED = "127.0.6.1"
SLOW_SHARED = "127.0.7.101"


def test_vhosts_on_one_ip_are_crawled_at_the_ip_delay(tmp_path):
    # 20 hostnames on one IP + 5 one-host IPs. DOWNLOAD_DELAY 2 s per host, LARBIN_IP_DELAY
    # 0.25 s per IP: the shared IP may serve 4 requests a second (the host limit would allow
    # 10), where pacing by IP alone at DOWNLOAD_DELAY allowed 1 every 2 s, 1/8 of it.
    hosts: dict[str, dict[str, Any]] = {
        f"v{i:02d}.test": {"ip": SHARED, "pages": 2} for i in range(20)
    }
    hosts.update({f"solo{i}.test": {"ip": f"127.0.6.{i + 2}", "pages": 3} for i in range(5)})
    host_delay, ip_delay = 2.0, 0.25
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": host_delay, "LARBIN_IP_DELAY": ip_delay},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.requests
    assert _fetched_ok(log, web.port) == web.pages()
    for host, gaps in gaps_by_host(log).items():
        assert min(gaps) >= host_delay - SLACK, host
    for ip, gaps in gaps_by_ip(log).items():
        assert min(gaps) >= ip_delay - SLACK, ip
    shared = sorted(e["t"] for e in log if e["ip"] == SHARED)
    assert len(shared) == 20 * 4  # robots.txt, /sitemap.xml and 2 pages per hostname
    efficiency = (len(shared) - 1) * ip_delay / (shared[-1] - shared[0])
    print(
        f"shared IP: {len(shared)} requests in {shared[-1] - shared[0]:.2f} s, "
        f"efficiency {efficiency:.3f} of the IP limit"
    )
    assert efficiency >= 0.9


def test_a_slow_shared_ip_gets_a_request_every_ip_delay_its_latency_not_added(tmp_path):
    # 10 hostnames on one IP whose server takes 0.15 s to answer, LARBIN_IP_DELAY 0.25 s:
    # one connection, a request every 0.25 s. Counting the delay from each answer's end
    # gave one every 0.40 s (efficiency ~0.6), the server's latency added to every gap.
    hosts = {f"s{i}.test": {"ip": SLOW_SHARED, "pages": 2, "slow": 0.15} for i in range(10)}
    ip_delay = 0.25
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": 2.0, "LARBIN_IP_DELAY": ip_delay},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.requests
    assert _fetched_ok(log, web.port) == web.pages()
    shared = sorted(e["t"] for e in log if e["ip"] == SLOW_SHARED)
    assert len(shared) == 10 * 4  # robots.txt, /sitemap.xml and 2 pages per hostname
    gaps = [b - a for a, b in pairwise(shared)]
    assert min(gaps) >= ip_delay - SLACK  # still one request per delay at most
    efficiency = len(gaps) * ip_delay / (shared[-1] - shared[0])
    print(
        f"slow shared IP: median gap {statistics.median(gaps):.3f} s, efficiency {efficiency:.2f}"
    )
    assert efficiency >= 0.85


def test_bandwidth_cap_holds_over_every_10_s_window(tmp_path):
    cap = 100_000  # bytes/s; 5 IPs with 6 pages of 40 kB each: 1.2 MB, ~12 s at the cap
    hosts = {
        f"big{i}.test": {"ip": f"127.0.7.{i + 1}", "pages": 6, "size": 40_000} for i in range(5)
    }
    with polite.start(tmp_path / "web", hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds),
            settings={"DOWNLOAD_DELAY": 0.1, "LARBIN_IP_DELAY": 0.1, "LARBIN_BANDWIDTH_MAX": cap},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = sorted(crawl.requests, key=lambda e: e["t"])
    assert _fetched_ok(log, web.port) == web.pages()
    worst = max(
        sum(e["bytes"] for e in log if start["t"] <= e["t"] < start["t"] + 10) for start in log
    )
    print(f"largest 10 s window: {worst} bytes, {worst / (10 * cap):.3f} of the cap")
    assert worst <= 1.1 * 10 * cap
    # every site made progress before the last one finished: none waited for the others
    first_page = {h: min(e["t"] for e in _pages(log, h)) for h in hosts}
    last = max(e["t"] for e in log)
    assert max(first_page.values()) < last - 5
    # the sites take the budget in turn: between two fetches of a site, about one of each other
    # site's (a 40 kB opening is 0.4 s), not a wait while later sites take every opening
    opening = 40_000 / cap
    for h in hosts:
        times = [e["t"] for e in log if e["host"] == h]
        longest = max(b - a for a, b in pairwise(times))
        print(f"{h}: longest wait {longest:.2f} s, {longest / opening:.1f} openings")
        assert longest <= (len(hosts) + 3) * opening, h


def test_autothrottle_gives_the_slow_host_longer_gaps(tmp_path):
    hosts = {
        "slow.test": {"ip": "127.0.8.1", "pages": 8, "slow": 0.4},
        "quick.test": {"ip": "127.0.8.2", "pages": 8},
    }
    base = {"DOWNLOAD_DELAY": 0.1, "LARBIN_IP_DELAY": 0.1}
    with polite.start(tmp_path / "web", hosts) as web:
        adaptive = run_crawl(
            web,
            tmp_path / "auto",
            *seeds_args(web.seeds),
            settings={
                **base,
                "AUTOTHROTTLE_ENABLED": True,
                "AUTOTHROTTLE_START_DELAY": 0.1,
                "AUTOTHROTTLE_TARGET_CONCURRENCY": 0.5,
                "LARBIN_FROM": "crawler-ops@example.org",
            },
        )
        fixed = run_crawl(web, tmp_path / "fixed", *seeds_args(web.seeds), settings=base)
    for crawl in (adaptive, fixed):
        assert crawl.returncode == 0, crawl.stderr[-3000:]
        assert _fetched_ok(crawl.requests, web.port) == web.pages()

    def late_gaps(crawl) -> dict[str, float]:
        by_host: dict[str, list[float]] = defaultdict(list)
        for e in crawl.requests:
            by_host[e["host"]].append(e["t"])
        return {
            h: statistics.median([b - a for a, b in pairwise(sorted(ts))][3:])
            for h, ts in by_host.items()
        }

    auto, plain = late_gaps(adaptive), late_gaps(fixed)
    print(f"median gaps, autothrottle {auto}, fixed {plain}")
    # AutoThrottle's target: latency / 0.5 = 0.8 s of delay after a 0.4 s answer
    assert auto["slow.test"] >= 0.4 + 0.6
    assert plain["slow.test"] < 0.4 + 0.3  # a fixed 0.1 s delay: the check can fail
    assert auto["quick.test"] < 0.5  # the fast host keeps DOWNLOAD_DELAY-ish gaps
    assert {e["from"] for e in adaptive.requests} == {"crawler-ops@example.org"}
    assert {e["from"] for e in fixed.requests} == {None}  # LARBIN_FROM empty: not sent


def test_retry_after_holds_across_sigint_and_resume(tmp_path):
    hosts = {
        "ra.test": {"ip": "127.0.5.6", "pages": 3, "throttle": 1, "retry_after": "6"},
        "calm.test": {"ip": "127.0.5.7", "pages": 30},
    }
    settings = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY": 0.2, "LARBIN_IP_DELAY": 0.1}
    with polite.start(tmp_path / "web", hosts) as web:
        first = run_until(web, tmp_path / "first", settings, after_requests=6, sig=signal.SIGINT)
        assert (tmp_path / "job" / "politeness" / "pauses.json").exists()
        second = run_crawl(web, tmp_path / "second", *seeds_args(web.seeds), settings=settings)
    assert second.returncode == 0, second.stderr[-3000:]
    log = first.requests + second.requests
    t429 = next(e["t"] for e in first.requests if e["status"] == 429)
    ra_later = [e["t"] - t429 for e in log if e["ip"] == "127.0.5.6" and e["t"] > t429]
    assert min(ra_later) >= 6.0 - SLACK, ra_later
    assert min(e["t"] for e in second.requests) < t429 + 6  # the resume began inside the pause
    assert _fetched_ok(log, web.port) == web.pages()
    assert second.stats["larbin/throttled/resumed"] == 1


def test_retry_after_holds_across_two_distributed_workers(tmp_path, redis_url):
    hosts = {
        "ra.test": {"ip": "127.0.5.8", "pages": 4, "throttle": 1, "retry_after": "4"},
        "ra-vhost.test": {"ip": "127.0.5.8", "pages": 3},
        "calm.test": {"ip": "127.0.5.9", "pages": 20},
    }
    with polite.start(tmp_path / "web", hosts) as web:
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *seeds_args(web.seeds),
                DOWNLOAD_DELAY=0.2,
                LARBIN_IP_DELAY=0.1,
            )
            for i in range(2)
        ]
        wait_workers(procs)
        log = web.read_log()
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    assert _fetched_ok(log, web.port) == web.pages()
    t429 = next(e["t"] for e in log if e["status"] == 429)
    later = [e["t"] - t429 for e in log if e["ip"] == "127.0.5.8" and e["t"] > t429]
    assert min(later) >= 4.0 - SLACK, later
    # both workers worked, and the one pause was counted once
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert sum(s.get("larbin/throttled/429", 0) for s in stats) == 1
    assert all(s.get("item_scraped_count", 0) for s in stats), stats
    # per host, DOWNLOAD_DELAY holds across workers too
    for host, gaps in gaps_by_host(log).items():
        assert min(gaps) >= 0.2 - 0.005, host


@contextmanager
def tinyproxy(workdir: Path) -> Iterator[str]:
    """A real tinyproxy on a free loopback port, in the foreground; yields its URL by name."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "tinyproxy.conf"
    conf.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\n"
        "MaxClients 20\nLogLevel Info\n"
    )
    with open(workdir / "tinyproxy.log", "wb") as log:
        proc = subprocess.Popen(
            [TINYPROXY, "-d", "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((workdir / "tinyproxy.log").read_text()) from None
                time.sleep(0.05)
        yield f"http://localhost:{port}"  # a name: the resolver's SSRF guard meets it
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_crawl_through_a_real_proxy_groups_by_host_and_keeps_the_guard(tmp_path, monkeypatch):
    # The proxy resolves the targets; tinyproxy knows only real names, so the target is
    # "localhost" (127.0.0.1). With LARBIN_ALLOWED_NETWORKS empty (the default) the guard still
    # refuses the private literals, and allows the proxy's own loopback address.
    hosts = {"localhost": {"ip": "127.0.0.1", "pages": 5}}
    with polite.start(tmp_path / "web", hosts) as web, tinyproxy(tmp_path / "proxy") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("http_proxy", proxy)
        refused = [f"http://127.0.5.12:{web.port}/", f"http://10.0.0.1:{web.port}/"]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            *seeds_args(web.seeds + refused),
            settings={"DOWNLOAD_DELAY": 0.3, "LARBIN_ALLOWED_NETWORKS": "", "LARBIN_RESOLVE": "{}"},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    log = crawl.requests
    assert _fetched_ok(log, web.port) == web.pages()
    assert all("tinyproxy" in (e["via"] or "") for e in log)  # every request came through it
    assert crawl.stats["larbin/dropped/ssrf"] == 2
    assert "larbin/dns/lookups" not in crawl.stats  # the crawler resolved no target itself
    assert min(gaps_by_host(log)["localhost"]) >= 0.3 - SLACK
