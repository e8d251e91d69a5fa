"""The simulated internet (``testweb/internet``): its DNS server, web, truth and analyzer.

DNS is queried with real clients (dnslib's, and ``dig``), the web with real HTTP(S) requests,
over loopback addresses of 127.100.0.0/14 only.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
import time
from typing import TYPE_CHECKING

import pytest
from dnslib import QTYPE, RCODE, DNSRecord  # type: ignore[import-untyped]

from testweb.internet.dns import DnsThread
from testweb.internet.logs import read_dns
from testweb.internet.model import IPV6_LOOPBACK, Host, Internet, Latency, Mix

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

BASE = "127.100.0.0"
DNS_IP = "127.100.200.53"
# failures common enough that 400 hosts hold each kind
MIX = Mix(nxdomain=0.05, servfail=0.05, silent_dns=0.05, cname=0.2, aaaa_only=0.05,
          big_answer=0.03)


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


def _ask(dns: DnsThread, name: str, qtype: str = "A", *, tcp: bool = False,
         timeout: float = 5) -> DNSRecord:
    query = DNSRecord.question(name, qtype)
    return DNSRecord.parse(query.send(dns.address, dns.port, tcp=tcp, timeout=timeout))


def test_dns_answers_an_address_with_the_names_ttl(net: Internet, dns: DnsThread) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "4" and not h.cname
                 and len(h.addresses) == 1)
    reply = _ask(dns, host.name)
    assert reply.header.rcode == RCODE.NOERROR and reply.header.aa
    assert [(rr.rtype, str(rr.rdata), rr.ttl) for rr in reply.rr] == [
        (QTYPE.A, host.addresses[0], host.ttl)]
    assert _ask(dns, host.name, "AAAA").rr == []  # NODATA: no AAAA for an IPv4 host
    assert len({h.ttl for h in map(net.host, range(100))}) > 2  # TTLs differ per name


def test_dns_follows_a_cname_chain(net: Internet, dns: DnsThread) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "4" and h.cname >= 2
                 and len(h.addresses) == 1)
    reply = _ask(dns, host.name)
    chain = [(QTYPE[rr.rtype], str(rr.rname).rstrip("."), str(rr.rdata).rstrip("."))
             for rr in reply.rr]
    names = [host.name] + [f"c{s}-h{host.index}.cdn.sim" for s in range(1, host.cname + 1)]
    assert chain == [("CNAME", a, b) for a, b in itertools.pairwise(names)] + [
        ("A", names[-1], host.addresses[0])]
    middle = _ask(dns, names[1])  # a name inside the chain answers the rest of it
    assert str(middle.rr[-1].rdata) == host.addresses[0] and len(middle.rr) == host.cname


def test_dns_nxdomain_servfail_and_unknown_names(net: Internet, dns: DnsThread) -> None:
    nx = _find(net, lambda h: h.dns == "nxdomain")
    reply = _ask(dns, nx.name)
    assert reply.header.rcode == RCODE.NXDOMAIN and not reply.rr
    assert [QTYPE[rr.rtype] for rr in reply.auth] == ["SOA"]  # negative caching (RFC 2308)
    assert _ask(dns, _find(net, lambda h: h.dns == "servfail").name).header.rcode == RCODE.SERVFAIL
    for unknown in ("h400.sim", "nope.example", f"www.{_find(net, lambda h: not h.www).name}"):
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


def test_dns_truncates_big_answers_over_udp_and_tcp_gets_all(
        net: Internet, dns: DnsThread) -> None:
    host = _find(net, lambda h: h.dns == "ok" and h.family == "4" and len(h.addresses) > 1)
    udp = _ask(dns, host.name)
    assert udp.header.tc and not udp.rr and str(udp.q.qname).rstrip(".") == host.name
    tcp = _ask(dns, host.name, tcp=True)
    assert not tcp.header.tc and sorted(str(rr.rdata) for rr in tcp.rr) == sorted(host.addresses)
    # dig, as a resolver does, retries over TCP on its own when the TC bit is set
    out = subprocess.run(["dig", f"@{dns.address}", "-p", str(dns.port), "+noedns", "+tries=1",
                          "+time=5", "+short", host.name, "A"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
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
        ("udp", "A", host.addresses[0]), ("udp", "AAAA", "NXDOMAIN"), ("udp", "A", "TC")]
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
