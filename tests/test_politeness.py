"""Per-IP politeness, DNS, slow hosts, timeouts and the SSRF guard, measured at the server.

Every crawl here is a real ``scrapy crawl larbin`` against the test web; the facts checked are
the server's request log (arrival time and IP of every request, robots.txt included) and the
crawl's stats. Each check has a run in which it fails, to show it can.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.support.cores import host_table
from tests.support.crawl import ROOT, run_crawl, seeds_args
from testweb.harness import gaps_by_host, gaps_by_ip, start_web
from testweb.web import POLITENESS_FAST_HOSTS, POLITENESS_SLOW_HOSTS

pytestmark = pytest.mark.timing  # gaps to the millisecond at the server: make test runs it alone

DELAY = 0.3  # DOWNLOAD_DELAY (per host) of the polite runs; h03's robots.txt asks for 1 s
IP_DELAY = 0.2  # LARBIN_IP_DELAY of the polite runs
SLACK = 0.001


def too_close(
    requests: list[dict[str, Any]], delay: float, gaps_by=gaps_by_host
) -> dict[str, float]:
    """Host (or IP) -> its shortest interval, where two requests came closer than ``delay``."""
    return {
        key: min(gaps)
        for key, gaps in gaps_by(requests).items()
        if gaps and min(gaps) < delay - SLACK
    }


@pytest.fixture(scope="module")
def polite_and_control(tmp_path_factory):
    """The default web crawled politely (delay 0.3 s), then with the delay and Crawl-delay off."""
    tmp = tmp_path_factory.mktemp("polite")
    with start_web(tmp / "web") as web:
        args = seeds_args(web.seeds)
        polite = run_crawl(
            web,
            tmp / "polite",
            *args,
            settings={"DOWNLOAD_DELAY": DELAY, "LARBIN_IP_DELAY": IP_DELAY},
        )
        control = run_crawl(
            web,
            tmp / "control",
            *args,
            settings={
                "DOWNLOAD_DELAY": 0,
                "LARBIN_IP_DELAY": 0,
                "LARBIN_IP_CONNECTIONS": 8,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
                "LARBIN_ROBOTS_CRAWL_DELAY_MAX": 0,
            },
        )
        truth = web.web.ground_truth(web.seeds, depth=5)
        yield web, polite, control, truth


@pytest.mark.crawl
def test_no_two_requests_to_one_host_or_ip_closer_than_its_delay(polite_and_control):
    web, polite, control, truth = polite_and_control
    assert polite.returncode == 0, polite.stderr[-3000:]
    assert polite.fetched(web.port) == truth
    assert any(e["path"] == "/robots.txt" for e in polite.requests)  # robots.txt is counted
    assert polite.sitemap_counts(web.port)  # and so are the sitemaps (LARBIN_SITEMAPS)
    # h01.test and alias01.test share 127.0.1.2: the IP's budget for both names
    shared = {e["host"] for e in polite.requests if e["ip"] == "127.0.1.2"}
    assert shared == {"h01.test", "alias01.test"}
    assert too_close(polite.requests, DELAY) == {}
    assert too_close(polite.requests, IP_DELAY, gaps_by_ip) == {}
    # the control run (no delays, 8 connections per IP) breaks both rules, so the checks can fail
    assert control.returncode == 0, control.stderr[-3000:]
    assert control.fetched(web.port) == truth
    assert too_close(control.requests, DELAY)
    assert "127.0.1.2" in too_close(control.requests, IP_DELAY, gaps_by_ip)


@pytest.mark.crawl
def test_crawl_delay_from_robots_txt_is_applied(polite_and_control):
    web, polite, control, _ = polite_and_control
    assert web.web.crawl_delay("h03.test") == 1
    h03 = [e for e in polite.requests if e["host"] == "h03.test"]
    assert len(h03) >= 3  # robots.txt and at least two pages
    assert too_close(h03, 1.0) == {}
    assert polite.stats["larbin/robots/crawl_delay"] == 1
    # with Crawl-delay capped at 0 (LARBIN_ROBOTS_CRAWL_DELAY_MAX) h03 is fetched faster
    assert too_close([e for e in control.requests if e["host"] == "h03.test"], 1.0)


def test_crawl_delay_learnt_after_a_fetch_lengthens_the_pause_already_started():
    now = [100.0]
    hosts = host_table(0.3, clock=lambda: now[0])
    hs = hosts.get("h03.test")
    hosts.start(hs)
    hosts.finish(hs, release=True)  # robots.txt fetched: the host's 0.3 s pause starts
    assert hs.ready_at == 100.3
    hosts.set_crawl_delay(hs, 1.0)  # ...then parsed: Crawl-delay 1
    assert hs.ready_at == 101.0
    hosts.set_crawl_delay(hs, 0.5)  # a second robots.txt asking less: the larger holds
    assert hs.ready_at == 101.0 and hosts.delay(hs) == 1.0
    hosts.set_crawl_delay(hs, 3600)  # capped at LARBIN_ROBOTS_CRAWL_DELAY_MAX
    assert hosts.delay(hs) == 30.0
    assert hosts.delay(hosts.get("other.test")) == 0.3  # another host on the IP: its own delay


@pytest.mark.crawl
def test_one_dns_lookup_per_hostname(polite_and_control):
    web, polite, _, _ = polite_and_control
    hosts = {e["host"] for e in polite.requests}
    assert len(polite.requests) > 10 * len(hosts) / 2  # many URLs per host
    assert polite.stats["larbin/dns/lookups"] == len(hosts) == len(web.hosts)
    assert "larbin/dns/failures" not in polite.stats
    # the gauges are written: every IP seen, none fetching once the crawl is over
    assert polite.stats["larbin/ip/seen"] == len(set(web.hosts.values()))
    assert polite.stats["larbin/ip/active"] == 0


def _fast_span(crawl, port: int) -> tuple[int, float]:
    """(fast-host requests, seconds from the first request of the run to the last fast one)."""
    start = min(e["t"] for e in crawl.requests)
    fast = [e for e in crawl.requests if e["host"] in POLITENESS_FAST_HOSTS]
    return len(fast), max(e["t"] for e in fast) - start


@pytest.mark.crawl
def test_slow_hosts_do_not_slow_the_rest(tmp_path):
    # The scenario (10% of hosts answering in 10-30 s) scaled down by ~5: 2 of 20 hosts
    # answer every request after 4 s, 18 fast hosts have 15 pages each at a 0.4 s delay.
    delay, slow_delay = 0.4, 4.0
    with start_web(tmp_path / "web", web="politeness", slow_delay=slow_delay) as web:
        fast_seeds = [web.url(h) for h in POLITENESS_FAST_HOSTS]
        all_seeds = fast_seeds + [web.url(h) for h in POLITENESS_SLOW_HOSTS]
        settings = {"DOWNLOAD_DELAY": delay}

        def crawl(name: str, seeds: list[str], **extra: Any):
            result = run_crawl(
                web,
                tmp_path / name,
                *seeds_args(seeds),
                settings={**settings, **extra},
            )
            assert result.returncode == 0, result.stderr[-3000:]
            return result

        alone = crawl("alone", fast_seeds)
        mixed = crawl("mixed", all_seeds)
        # control: a fixed global budget of 2 connections lets the slow hosts hog them
        hogged = crawl("hogged", all_seeds, CONCURRENT_REQUESTS=2, LARBIN_FETCH_IN_FLIGHT_MAX=0)
    n_alone, span_alone = _fast_span(alone, web.port)
    n_mixed, span_mixed = _fast_span(mixed, web.port)
    n_hogged, span_hogged = _fast_span(hogged, web.port)
    assert n_alone == n_mixed == n_hogged == 18 * 17  # 15 pages, robots.txt, /sitemap.xml a host
    assert {e["host"] for e in mixed.requests} >= set(POLITENESS_SLOW_HOSTS)
    ratio = (n_mixed / span_mixed) / (n_alone / span_alone)
    ratio_hogged = (n_hogged / span_hogged) / (n_alone / span_alone)
    print(
        f"fast-host rate with slow hosts / without: {ratio:.3f} "
        f"({span_alone:.2f} s vs {span_mixed:.2f} s); with 2 connections: {ratio_hogged:.3f}"
    )
    assert ratio >= 0.9
    assert ratio_hogged < 0.9


@pytest.mark.crawl
def test_ip_that_keeps_timing_out_or_refusing_is_dropped(tmp_path):
    # slow.test answers after 2 s, past a 0.5 s page timeout; dead.test maps to a loopback IP
    # nobody listens on (connection refused). Both are dropped after 3 failures.
    with start_web(tmp_path / "web", slow_delay=2.0) as web:
        slow = [web.url("slow.test", p) for p in ("/", "/a.html", "/b.html", "/c.html", "/d.html")]
        dead = [f"http://dead.test:{web.port}/{p}.html" for p in range(5)]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            *seeds_args([web.url("h00.test"), *slow, *dead]),
            settings={
                "LARBIN_RESOLVE": json.dumps({**web.resolve, "dead.test": "127.0.9.9"}),
                "DOWNLOAD_TIMEOUT": 0.5,
                "LARBIN_IP_BACKOFF": 0.1,
                "RETRY_TIMES": 0,
            },
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["finish_reason"] == "finished"
    assert crawl.stats["larbin/ip/dropped"] == 2
    # 3 failures each, all robots.txt (asked again before each page while the address has
    # never answered): the 3 pages that asked are not fetched (RFC 9309: unreachable =
    # disallow), the other URLs never went out
    assert crawl.stats["larbin/robots/unreachable"] == 2 * 3
    assert crawl.stats["larbin/dropped/noconnection"] == 2 * (5 - 3)
    assert crawl.stats["larbin/timeout/pages"] == 3
    assert sum(e["ip"] == "127.0.1.10" for e in crawl.requests) == 3
    assert web.url("h00.test") in crawl.fetched(web.port)
    assert "Dropping IP 127.0.1.10" in crawl.stderr


@pytest.mark.parametrize(
    "handler",
    [
        "larbinscrapy.lean.http1.LeanHttpDownloadHandler",  # times its own pages
        "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",  # PageDeadlineHandler times
    ],
    ids=["lean", "scrapy"],
)
@pytest.mark.crawl
def test_page_timeout_grows_with_the_bytes_received(web, tmp_path, handler):
    # larbin's page timeout: DOWNLOAD_TIMEOUT (1 s here) + 1 s per 2,000 bytes received.
    # 8,000 bytes at 4,000 B/s take 2 s but earn 4 s more: fetched. At 500 B/s the deadline
    # (1 + t/4 s) is passed at 1.33 s: cancelled. A fixed 1 s timeout would cancel both.
    server = subprocess.Popen(
        [sys.executable, "-m", "testweb.trickle", "--ip", "127.0.4.1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = json.loads(server.stdout.readline())["port"]
        fast = f"http://trickle.test:{port}/trickle/4000/8000.html"
        slow = f"http://trickle.test:{port}/trickle/500/8000.html"
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            f"urls={fast},{slow}",
            settings={
                "LARBIN_RESOLVE": json.dumps({**web.resolve, "trickle.test": "127.0.4.1"}),
                "DOWNLOAD_TIMEOUT": 1,
                "RETRY_TIMES": 0,
                "RETRY_GIVE_UP_LOG_LEVEL": "ERROR",  # the give-up line says why (DEBUG by default)
                "ROBOTSTXT_OBEY": False,
                "LARBIN_FETCH_HANDLER": handler,
            },
        )
    finally:
        server.terminate()
        server.wait()
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert [item["url"] for item in crawl.items] == [fast]
    assert crawl.items[0]["length"] == 8000
    assert crawl.stats["larbin/timeout/pages"] == 1
    assert "larbin page timeout" in crawl.stderr


def _no_connection_outside_the_test_web(crawl) -> None:
    """Every request that entered the downloader reached the test web: none went elsewhere."""
    stats = crawl.stats
    assert stats.get("downloader/request_count", 0) == len(crawl.requests)
    errors = {k for k in stats if k.startswith("downloader/exception_type_count/")}
    assert errors <= {"downloader/exception_type_count/scrapy.exceptions.IgnoreRequest"}


@pytest.mark.crawl
def test_ssrf_guard_refuses_private_and_metadata_addresses(web, tmp_path):
    # Never a real target: the guard refuses these before any connection (checked by stats).
    private = [
        f"http://metadata.test:{web.port}/latest/meta-data/",  # resolves to 169.254.169.254
        f"http://intranet.test:{web.port}/",  # resolves to 10.0.0.1
        f"http://10.0.0.1:{web.port}/admin",  # IP literals: no lookup at all
        "http://169.254.169.254/latest/meta-data/",
    ]
    resolve = {**web.resolve, "metadata.test": "169.254.169.254", "intranet.test": "10.0.0.1"}
    crawl = run_crawl(
        web,
        tmp_path / "out",
        "-a",
        "depth=0",
        *seeds_args([web.url("h00.test"), *private]),
        settings={"LARBIN_RESOLVE": json.dumps(resolve)},  # 127.0.0.0/8 allowed (support/crawl.py)
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["larbin/dropped/ssrf"] == 4
    assert crawl.fetched(web.port) == {web.url("h00.test")}  # the 127.x host is fetched
    assert {e["ip"] for e in crawl.requests} == {"127.0.1.1"}
    _no_connection_outside_the_test_web(crawl)


@pytest.mark.crawl
def test_ssrf_guard_without_allowed_networks_refuses_the_loopback_web(web, tmp_path):
    crawl = run_crawl(
        web,
        tmp_path / "out",
        *seeds_args(web.seeds),
        settings={"LARBIN_ALLOWED_NETWORKS": ""},
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.requests == []
    assert crawl.stats["larbin/dropped/ssrf"] == len(web.seeds)
    assert crawl.stats.get("downloader/request_count", 0) == 0


@pytest.mark.crawl
def test_unresolvable_host_is_dropped_once_looked_up(web, tmp_path):
    nowhere = [f"http://nowhere.invalid:{web.port}/{p}.html" for p in range(4)]
    crawl = run_crawl(
        web,
        tmp_path / "out",
        "-a",
        "depth=0",
        *seeds_args([web.url("h00.test"), *nowhere]),
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["finish_reason"] == "finished"
    assert crawl.stats["larbin/dropped/dns"] == 4
    assert crawl.stats["larbin/dns/failures"] == 1
    assert crawl.stats["larbin/dns/lookups"] == 2  # h00.test and nowhere.invalid, once each
    assert crawl.fetched(web.port) == {web.url("h00.test")}
    _no_connection_outside_the_test_web(crawl)


def test_settings_install_the_page_deadline_handler():
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", "DOWNLOAD_HANDLERS"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "PageDeadlineHandler" in result.stdout
