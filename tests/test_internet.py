"""The simulated internet (``testweb/internet``): its DNS server, web, truth and analyzer.

DNS is queried with real clients (dnslib's, and ``dig``), the web with real HTTP(S) requests,
over loopback addresses of 127.100.0.0/14 only.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import pytest
from dnslib import QTYPE, RCODE, DNSRecord  # type: ignore[import-untyped]

from tests.support.marks import require_crawl_marker
from testweb.internet.__main__ import main as internet_main
from testweb.internet.analyze import ROBOTS, analyze, load
from testweb.internet.dns import DnsThread, dns_address
from testweb.internet.harness import (
    ROOT,
    InternetProcess,
    InternetThread,
    crawl_command,
    run_watched,
)
from testweb.internet.logs import WebEntry, read_dns, read_web
from testweb.internet.model import IPV6_LOOPBACK, Host, Internet, Latency, Mix
from testweb.internet.netns import ETC_NETNS, Namespace, leftovers
from testweb.internet.truth import walk
from testweb.internet.web import render_page

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

BASE = "127.100.0.0"
DNS_IP = "127.100.200.53"
# failures common enough that 400 hosts hold each kind
MIX = Mix(nxdomain=0.05, servfail=0.05, silent_dns=0.05, cname=0.2, aaaa_only=0.05, big_answer=0.03)


def _find(net: Internet, want: Callable[[Host], bool]) -> Host:
    return next(h for h in map(net.host, range(net.hosts)) if want(h))


@pytest.fixture(scope="module")
def net() -> Internet:
    return Internet(400, seed=7, base=BASE, mix=MIX)


@pytest.fixture(scope="module")
def dns(net: Internet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DnsThread]:
    log = tmp_path_factory.mktemp("dns") / "dns.log"
    with DnsThread(net, DNS_IP, 0, log=str(log)) as server:
        yield server


def _ask(
    dns: DnsThread, name: str, qtype: str = "A", *, tcp: bool = False, timeout: float = 5
) -> DNSRecord:
    query = DNSRecord.question(name, qtype)
    return DNSRecord.parse(query.send(dns.address, dns.port, tcp=tcp, timeout=timeout))


def test_dns_answers_an_address_with_the_names_ttl(net: Internet, dns: DnsThread) -> None:
    host = _find(
        net, lambda h: h.dns == "ok" and h.family == "4" and not h.cname and len(h.addresses) == 1
    )
    reply = _ask(dns, host.name)
    assert reply.header.rcode == RCODE.NOERROR and reply.header.aa
    assert [(rr.rtype, str(rr.rdata), rr.ttl) for rr in reply.rr] == [
        (QTYPE.A, host.addresses[0], host.ttl)
    ]
    assert _ask(dns, host.name, "AAAA").rr == []  # NODATA: no AAAA for an IPv4 host
    assert len({h.ttl for h in map(net.host, range(100))}) > 2  # TTLs differ per name


def test_dns_follows_a_cname_chain(net: Internet, dns: DnsThread) -> None:
    host = _find(
        net, lambda h: h.dns == "ok" and h.family == "4" and h.cname >= 2 and len(h.addresses) == 1
    )
    reply = _ask(dns, host.name)
    chain = [
        (QTYPE[rr.rtype], str(rr.rname).rstrip("."), str(rr.rdata).rstrip(".")) for rr in reply.rr
    ]
    names = [host.name] + [f"c{s}-h{host.index}.cdn.sim.test" for s in range(1, host.cname + 1)]
    assert chain == [("CNAME", a, b) for a, b in itertools.pairwise(names)] + [
        ("A", names[-1], host.addresses[0])
    ]
    middle = _ask(dns, names[1])  # a name inside the chain answers the rest of it
    assert str(middle.rr[-1].rdata) == host.addresses[0] and len(middle.rr) == host.cname


def test_dns_nxdomain_servfail_and_unknown_names(net: Internet, dns: DnsThread) -> None:
    nx = _find(net, lambda h: h.dns == "nxdomain")
    reply = _ask(dns, nx.name)
    assert reply.header.rcode == RCODE.NXDOMAIN and not reply.rr
    assert [QTYPE[rr.rtype] for rr in reply.auth] == ["SOA"]  # negative caching (RFC 2308)
    assert _ask(dns, _find(net, lambda h: h.dns == "servfail").name).header.rcode == RCODE.SERVFAIL
    for unknown in ("h400.sim.test", "nope.example", f"www.{_find(net, lambda h: not h.www).name}"):
        assert _ask(dns, unknown).header.rcode == RCODE.NXDOMAIN, unknown


def test_dns_silent_name_never_answers(net: Internet, dns: DnsThread) -> None:
    silent = _find(net, lambda h: h.dns == "silent")
    with pytest.raises((TimeoutError, socket.timeout)):
        _ask(dns, silent.name, timeout=1)
    live = _find(net, lambda h: h.dns == "ok" and h.family == "4")
    assert _ask(dns, live.name).rr  # and the server still answers others


def test_dns_aaaa_only_names_answer_ipv6_loopback(net: Internet, dns: DnsThread) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "6")
    reply = _ask(dns, host.name, "AAAA")
    assert [str(rr.rdata) for rr in reply.rr if rr.rtype == QTYPE.AAAA] == [IPV6_LOOPBACK]
    a_reply = _ask(dns, host.name, "A")
    assert a_reply.header.rcode == RCODE.NOERROR
    assert not [rr for rr in a_reply.rr if rr.rtype == QTYPE.A]


def test_dns_truncates_big_answers_over_udp_and_tcp_gets_all(net: Internet, dns: DnsThread) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "4" and len(h.addresses) > 1)
    udp = _ask(dns, host.name)
    assert udp.header.tc and not udp.rr and str(udp.q.qname).rstrip(".") == host.name
    tcp = _ask(dns, host.name, tcp=True)
    assert not tcp.header.tc and sorted(str(rr.rdata) for rr in tcp.rr) == sorted(host.addresses)
    # dig, as a resolver does, retries over TCP on its own when the TC bit is set
    out = subprocess.run(
        [
            "dig",
            f"@{dns.address}",
            "-p",
            str(dns.port),
            "+noedns",
            "+tries=1",
            "+time=5",
            "+short",
            host.name,
            "A",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert sorted(out.split()) == sorted(host.addresses)


def test_dns_log_has_one_line_a_query(net: Internet, tmp_path: Path) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "4" and len(h.addresses) == 1)
    log = tmp_path / "dns.log"
    with DnsThread(net, DNS_IP, 0, log=str(log)) as dns:
        _ask(dns, host.name)
        _ask(dns, _find(net, lambda h: h.dns == "nxdomain").name, "AAAA")
        _ask(dns, _find(net, lambda h: len(h.addresses) > 1 and h.dns == "ok").name)
    entries = read_dns(str(log))
    assert [(e.proto, e.qtype, e.answer) for e in entries] == [
        ("udp", "A", host.addresses[0]),
        ("udp", "AAAA", "NXDOMAIN"),
        ("udp", "A", "TC"),
    ]
    assert entries[0].name == host.name


def test_dns_latency_is_applied_in_the_server() -> None:
    net = Internet(50, seed=3, base=BASE, mix=Mix.none(), latency=Latency(dns_ms=300))
    host = net.host(0)
    assert host.dns_delay > 0.05
    with DnsThread(net, DNS_IP, 0) as dns:
        started = time.monotonic()
        replies = [_ask(dns, net.host(i).name) for i in range(3)]
        first = time.monotonic() - started
        assert all(r.rr for r in replies)
        assert first >= sum(net.host(i).dns_delay for i in range(3)) * 0.9
    with DnsThread(net, DNS_IP, 0, latency=False) as dns:
        assert _ask(dns, host.name).rr  # latency can be switched off per server


def test_the_generator_is_deterministic() -> None:
    a, b = Internet(2000, seed=11), Internet(2000, seed=11)
    assert [a.host(i) for i in range(0, 2000, 7)] == [b.host(i) for i in range(0, 2000, 7)]
    assert a.listening == b.listening
    c = Internet(2000, seed=12)
    assert [a.host(i) for i in range(50)] != [c.host(i) for i in range(50)]
    # latency changes the delays and nothing else of the web
    slow = Internet(2000, seed=11, latency=Latency(dns_ms=30, ttfb_ms=100, bandwidth=1e6))
    assert [(h.pages, h.links_seed, h.addresses) for h in map(slow.host, range(300))] == [
        (h.pages, h.links_seed, h.addresses) for h in map(a.host, range(300))
    ]
    # the host is a function of (seed, index) only: the cache changes nothing
    small = Internet(2000, seed=11, cache=1)
    assert [small.host(i) for i in range(0, 2000, 7)] == [a.host(i) for i in range(0, 2000, 7)]


def test_the_generator_has_the_webs_shape() -> None:
    net = Internet(20_000, seed=5, addresses=2000)
    hosts = [net.host(i) for i in range(net.hosts)]
    per_address: dict[str, int] = {}
    for h in hosts:
        if len(h.addresses) == 1:
            per_address[h.addresses[0]] = per_address.get(h.addresses[0], 0) + 1
    counts = sorted(per_address.values())
    assert counts[-1] >= 1000 and counts.count(1) >= 1000  # shared hosting and a long tail
    mean_pages = sum(h.pages for h in hosts) / len(hosts)
    assert 3.5 < mean_pages < 7 and max(h.pages for h in hosts) >= 500  # a power law, mean ~5
    assert 0.4 < sum(h.https for h in hosts) / len(hosts) < 0.6
    assert {h.robots for h in hosts} == {"allow", "404", "disallow", "5xx", "delay"}
    assert any(h.dead for h in hosts) and any(h.tarpit for h in hosts)


def test_write_seeds_without_serving(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    assert (
        internet_main(["--hosts", "50", "--seed", "3", "--write-seeds", str(seeds), "--no-serve"])
        == 0
    )
    lines = seeds.read_text().splitlines()
    assert lines == Internet(50, 3).seeds() and lines[0] == "http://h0.sim.test/"


# --- the web ----------------------------------------------------------------------------------
def _get(net: Internet, url: str, ca: str, timeout: float = 10) -> tuple[int, str | None, bytes]:
    """GET ``url`` from the host's address (no DNS: the generator says where it is)."""
    parts = urlsplit(url)
    host = net.host_of(parts.hostname or "")
    assert host is not None
    sock = socket.create_connection((host.addresses[0], parts.port or 80), timeout=timeout)
    if parts.scheme == "https":
        sock = ssl.create_default_context(cafile=ca).wrap_socket(
            sock, server_hostname=parts.hostname
        )
    with sock:
        sock.sendall(
            f"GET {parts.path or '/'} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("Location"), body


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Internet, InternetThread]]:
    net = Internet(300, seed=4, base=BASE, http_port=0, https_port=0)
    with InternetThread(net, tmp_path_factory.mktemp("web")) as running:
        yield net, running


def test_the_web_serves_what_the_truth_says_and_coverage_is_full(
    served: tuple[Internet, InternetThread],
) -> None:
    net, running = served
    log = running.logdir / "web.log"
    start = len(read_web(str(log))) if log.exists() else 0
    truth = walk(net, net.seeds())
    assert len(truth.hosts) > 200 and truth.disallowed and truth.dns_failed
    for url in sorted(truth.requested):
        status, location, body = _get(net, url, str(running.ca.ca_path))
        parts = urlsplit(url)
        route = net.route(parts.scheme, parts.hostname or "", parts.path)
        assert (status, location) == (route.status, route.location), url
        if route.status == 200 and route.host is not None:
            assert body == render_page(net, route.host, route.page)
            hrefs = re.findall(r'href="([^"]+)"', body.decode())
            assert [urljoin(url, h) for h in hrefs] == net.page_links(route.host, route.page)
    web = _wait_log(running, start + len(truth.requested))[start:]
    report = analyze(net, net.seeds(), web, [])
    assert report["coverage"] == 1.0 and report["host_coverage"] == 1.0, report
    assert report["fetched_twice"] == 0 and report["disallowed_fetched"] == 0
    assert report["fetched_outside_truth"] == 0
    # a partial fetch: the even hosts only
    even = [e for e in web if getattr(net.host_of(e.host), "index", 1) % 2 == 0]
    half = analyze(net, net.seeds(), even, [])
    assert 0.2 < half["coverage"] < 0.8 and 0.2 < half["host_coverage"] < 0.8, half


def test_the_analyzer_counts_a_robots_txt_redirect_never_followed() -> None:
    """http -> https -> www: the chain asked to its end counts nothing; cut before its last
    hop, the site's rules came from no answer."""
    net = Internet(300, seed=4, http_port=8080, https_port=8443)
    host = next(h for h in map(net.host, range(net.hosts)) if h.live and h.www and h.https)
    chain: list[WebEntry] = []
    url: str | None = net.origin("http", host.name) + "/robots.txt"
    while url is not None:
        parts = urlsplit(url)
        route = net.route(parts.scheme, parts.hostname or "", parts.path)
        chain.append(
            WebEntry(
                0.0,
                host.addresses[0],
                parts.port or 0,
                parts.hostname or "",
                parts.path,
                route.status,
            )
        )
        url = route.location
    assert [e.host for e in chain] == [host.name, host.name, host.canonical]
    assert analyze(net, [], chain, [])["robots_moves_unfollowed"] == 0
    cut = analyze(net, [], chain[:-1], [])
    assert cut["robots_moves_unfollowed"] == 1
    # named, to look up in the crawl's log: the target never asked for
    assert cut["robots_moves_unfollowed_some"] == [net.origin("https", host.canonical) + ROBOTS]


def test_the_analyzer_names_some_of_the_hosts_and_urls_it_missed() -> None:
    """A crawl that fetched every URL of the truth but one host's: the report names that host
    and its URLs, not only how many were missed."""
    net = Internet(50, seed=4, http_port=8080, https_port=8443)
    seeds = net.seeds()
    truth = walk(net, seeds)
    missed = net.host(min(truth.hosts))
    web, lost = [], []
    for url in sorted(truth.requested):
        parts = urlsplit(url)
        if net.host_of(parts.hostname or "") == missed:
            lost.append(url)
            continue
        entry = WebEntry(0.0, "127.0.0.1", parts.port or 0, parts.hostname or "", parts.path, 200)
        web.append(entry)
    report = analyze(net, seeds, web, [])
    assert report["hosts_missed"] == 1 and report["hosts_missed_some"] == [missed.name]
    assert lost and report["urls_missed_some"] == lost[:10]


def _wait_log(running: InternetThread, count: int) -> list[WebEntry]:
    path = str(running.logdir / "web.log")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        entries = read_web(path) if os.path.exists(path) else []
        if len(entries) >= count:
            return entries
        time.sleep(0.05)
    raise AssertionError(f"{count} log lines expected")


def test_robots_variants_redirects_and_broken_hosts(
    served: tuple[Internet, InternetThread],
) -> None:
    net, running = served
    ca = str(running.ca.ca_path)
    hosts = [net.host(i) for i in range(net.hosts)]
    ok = [h for h in hosts if h.dns == "ok" and not h.dead and not h.tarpit and h.family == "4"]
    for variant, status in (
        ("allow", 200),
        ("disallow", 200),
        ("delay", 200),
        ("404", 404),
        ("5xx", 503),
    ):
        host = next(h for h in ok if h.robots == variant)
        got, _, body = _get(net, net.url(host)[:-1] + "/robots.txt", ca)
        assert got == status, variant
        if variant == "delay":
            assert b"Crawl-delay: 1" in body
    https_www = next(h for h in ok if h.https and h.www)
    seed = net.seed_url(https_www)
    status, location, _ = _get(net, seed, ca)  # http://bare -> https://bare -> https://www.
    assert status == 301 and location == net.origin("https", https_www.name) + "/"
    status, location, _ = _get(net, location, ca)
    assert status == 301 and location == net.url(https_www)
    assert _get(net, net.url(ok[0]) + "nope.html", ca)[0] == 404
    dead = next(h for h in hosts if h.dns == "ok" and h.dead)
    with pytest.raises(ConnectionRefusedError):
        _get(net, net.url(dead), ca)
    tarpit = next(h for h in hosts if h.dns == "ok" and h.tarpit and h.family == "4")
    with pytest.raises((TimeoutError, socket.timeout)):
        _get(net, net.url(tarpit), ca, timeout=1)


def test_time_to_first_byte_is_applied(tmp_path: Path) -> None:
    net = Internet(
        30,
        seed=2,
        base=BASE,
        http_port=0,
        https_port=0,
        mix=Mix.none(),
        latency=Latency(ttfb_ms=300),
    )
    with InternetThread(net, tmp_path) as running:
        host = net.host(0)
        started = time.monotonic()
        assert _get(net, net.url(host), str(running.ca.ca_path))[0] == 200
        assert time.monotonic() - started >= host.ttfb * 0.9 > 0.05


# --- a crawl inside a network namespace, through the system resolver ---------------------------
E2E_HOSTS = 150
E2E_SEED = 9


# Every cache of per-site and per-name state at its smallest: each entry is forgotten long
# before its site's page is due, so everything is looked up or read again when met again.
TINY_CACHES = [
    "LARBIN_ROBOTS_RESIDENT_MAX=2",
    "LARBIN_DNS_CACHE_MAX=2",
    "LARBIN_HOST_RESIDENT_MAX=1",
    "LARBIN_IP_RESIDENT_MAX=1",
]


# The tests of these crawls are marked `timing`: the redirect test reads the order of requests
# on an address from the server's log, and another test's crawl beside it (two test processes)
# changed that order once (a median of 7 against at most 6). They share the two crawls, so all
# of them run in make test's one-process phase, and the crawls run once.
@pytest.fixture(scope="module")
def e2e_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Two crawls of the same 150-host web at once, each in its own namespace (its own
    loopback: no port shared), mostly waiting on the network: ``e2e`` and ``e2e-tiny``."""
    require_crawl_marker("a crawl of the simulated internet")
    works = {name: tmp_path_factory.mktemp(name) for name in ("e2e", "e2e-tiny")}
    with ThreadPoolExecutor(2) as pool:
        # the defaults, stopped once the web log is still 6 s (names that never answer are
        # still taking their DNS timeout); TINY_CACHES, let run until it closes itself
        plain = pool.submit(_crawl_e2e, works["e2e"], [], 6)
        tiny = pool.submit(_crawl_e2e, works["e2e-tiny"], TINY_CACHES, 60)
        return {"e2e": plain.result(), "e2e-tiny": tiny.result()}


@pytest.fixture(scope="module")
def e2e(e2e_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``scrapy crawl larbin`` of a 150-host simulated internet in a namespace; the analyzer's
    report, the crawl's stats and how it ended. The crawl is stopped if it stalls."""
    return e2e_runs["e2e"]


@pytest.fixture(scope="module")
def e2e_tiny_caches(e2e_runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The same crawl with ``TINY_CACHES``, to its own end."""
    return e2e_runs["e2e-tiny"]


def _crawl_e2e(work: Path, extra: list[str], stall: float) -> dict[str, Any]:
    logdir = work / "internet"
    args = [
        "--hosts",
        str(E2E_HOSTS),
        "--seed",
        str(E2E_SEED),
        "--base",
        BASE,
        "--write-seeds",
        str(logdir / "seeds.txt"),
    ]
    with Namespace(dns_address(BASE)) as ns:
        with InternetProcess(logdir, args, netns=ns) as running:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "SSL_CERT_FILE": running.ca}
            settings = ["DOWNLOAD_TIMEOUT=3", *extra]
            cmd = ns.command(crawl_command(logdir / "seeds.txt", work, settings))
            run = run_watched(cmd, env, work, logdir / "web.log", timeout=90, stall=stall, grace=3)
        name = ns.name
    assert name not in leftovers()  # the namespace and its /etc/netns directory are gone
    assert not (ETC_NETNS / name).exists()
    internet, seeds, web, dns = load(logdir)
    stats_path = work / "stats.json"
    return {
        "run": run,
        "logdir": logdir,
        "report": analyze(internet, seeds, web, dns),
        "internet": internet,
        "seeds": seeds,
        "stats": json.loads(stats_path.read_text()) if stats_path.exists() else {},
        "crawl_log": (work / "crawl.log").read_text(errors="replace"),
    }


@pytest.mark.crawl
@pytest.mark.timing
def test_a_crawl_through_the_system_resolver_is_polite_and_exact(e2e: dict[str, Any]) -> None:
    report, net = e2e["report"], e2e["internet"]
    print(json.dumps({**report, "run": e2e["run"]}))  # shown with -s: today's figures
    assert report["truth_hosts"] > 100 and report["fetched_urls"] > 150, report
    # every live name was asked of the simulated DNS through /etc/resolv.conf (no LARBIN_RESOLVE)
    assert report["dns_live_hosts_never_asked"] == 0, report
    # a truncated answer: glibc's resolver asked again over TCP
    assert any(len(net.host(i).addresses) > 1 and net.host(i).dns == "ok" for i in range(net.hosts))
    assert report["dns_truncated"] >= 1 and report["dns_tcp"] >= 1, report
    assert report["disallowed_fetched"] == 0, report
    assert report["robots_moves_unfollowed"] == 0, report
    assert report["fetched_outside_truth"] == 0, report
    assert report["fetched_twice"] == 0, report
    assert report["coverage"] > 0.5 and report["host_coverage"] > 0.5, report
    # the command line gives the same report
    out = subprocess.run(
        [sys.executable, "-m", "testweb.internet.analyze", str(e2e["logdir"])],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert json.loads(out) == report


@pytest.mark.crawl
@pytest.mark.timing
def test_a_crawl_through_the_system_resolver_covers_every_live_host(e2e: dict[str, Any]) -> None:
    report = e2e["report"]
    assert report["coverage"] == 1.0 and report["host_coverage"] == 1.0, report


@pytest.mark.crawl
@pytest.mark.timing
def test_a_crawl_whose_caches_forget_everything_still_covers_every_live_host(
    e2e_tiny_caches: dict[str, Any],
) -> None:
    """A site's robots.txt rules, a name's answer, a host's and an IP's politeness state are
    forgotten past their caps and read or looked up again when met again. A page that waits
    for its host after its site's robots.txt was read (given back to the frontier) must not
    have to read it again: with the rules forgotten before it came back, it read the file
    again, waited again, and so on for good (a robots.txt 245 times, its page never)."""
    report, run = e2e_tiny_caches["report"], e2e_tiny_caches["run"]
    print(json.dumps({**report, "run": run}))
    assert run["stopped"] == "" and run["exit_code"] == 0, run
    assert report["coverage"] == 1.0 and report["host_coverage"] == 1.0, report
    assert report["disallowed_fetched"] == 0 and report["fetched_twice"] == 0, report
    # the robots.txt of a name (with its www. form, its http and https sites: their files
    # redirect to one another) read at most once for each of their URLs checked against it,
    # and once more (the first read, for the sitemap): the cache forgets the rules between
    # two pages, never between the read and the page it was read for
    truth = walk(e2e_tiny_caches["internet"], e2e_tiny_caches["seeds"])
    checked = Counter(
        (urlsplit(url).hostname or "").removeprefix("www.")
        for url in truth.requested | truth.disallowed
    )
    reads = Counter(  # answers that settle a read
        e.host.removeprefix("www.")
        for e in read_web(e2e_tiny_caches["logdir"] / "web.log")
        if e.path == "/robots.txt" and e.status in (200, 404)
    )
    over = {name: (n, checked[name]) for name, n in reads.items() if n > checked[name] + 1}
    assert reads and not over, over


@pytest.mark.crawl
@pytest.mark.timing
def test_a_robots_txt_or_sitemap_reached_by_a_redirect_is_not_fetched_again(
    e2e: dict[str, Any],
) -> None:
    """An http site that moved to https (or a bare name to www) redirects its robots.txt and
    sitemap to the new site's: those files are the new site's own, so the crawl reads each
    once (RFC 9309 section 2.3.1.2 applies them to both), not again when it meets the new
    site. Every other robots.txt and sitemap is asked once too while it answers."""
    web = read_web(e2e["logdir"] / "web.log")
    answered: dict[tuple[str, int, str], int] = {}
    redirected = 0
    for e in web:
        if e.path in ("/robots.txt", "/sitemap.xml"):
            redirected += e.status in (301, 302, 307, 308)
            if e.status in (200, 404):  # an answer that settles the file (not 5xx nor silence)
                key = (e.host, e.port, e.path)
                answered[key] = answered.get(key, 0) + 1
    assert redirected >= 10, redirected  # the web has moved sites
    twice = {key: n for key, n in answered.items() if n > 1}
    assert not twice, (len(twice), sorted(twice)[:10])


@pytest.mark.crawl
@pytest.mark.timing
def test_a_redirects_target_is_fetched_next_on_its_address(e2e: dict[str, Any]) -> None:
    """A page that moved (http to https, a bare name to www) redirects to a site new to the
    frontier. That site waited its turn in its address's round of sites (on a shared address,
    after every other site of it) while the connection its robots.txt had just opened went
    cold. A redirect's target now goes as a started site's next page does: next on its
    address, once its host's delay allows."""
    web = read_web(e2e["logdir"] / "web.log")
    between: list[int] = []  # requests to the same address between a redirect and its target
    for i, e in enumerate(web):
        if e.status not in (301, 302, 307, 308) or e.path in ("/robots.txt", "/sitemap.xml"):
            continue
        bare = e.host.removeprefix("www.")
        targets = {(bare, 443), ("www." + bare, 443), ("www." + bare, e.port)} - {(e.host, e.port)}
        others = 0
        for later in web[i + 1 :]:
            if (later.host, later.port) in targets and later.path == e.path:
                between.append(others)
                break
            others += later.ip == e.ip
    assert len(between) >= 20, between
    # a few at most: those leased, or held at the send-time gate, when it was queued (the
    # tree before: a median of 17, a round of the address's sites)
    assert sorted(between)[len(between) // 2] <= 6, sorted(between)


def test_a_crawl_with_a_jobdir_appends_its_items_so_the_same_command_resumes(tmp_path):
    """``bench_internet -s JOBDIR=DIR`` run again resumes the crawl (after a stop or a kill):
    ``-O`` there would be refused, as it would empty the items of pages not fetched again."""
    items = str(tmp_path / "items.jsonl")
    fresh = crawl_command(tmp_path / "seeds.txt", tmp_path, ["DOWNLOAD_TIMEOUT=3"])
    kept = crawl_command(tmp_path / "seeds.txt", tmp_path, [f"JOBDIR={tmp_path / 'job'}"])
    assert fresh[fresh.index(items) - 1] == "-O"
    assert kept[kept.index(items) - 1] == "-o"
