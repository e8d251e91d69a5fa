"""The crawl's resolver against a real DNS server on loopback (tests/support/dnsserver.py):
c-ares on the test process's reactor, each outcome and its stat, TTL bounds, the negative cache
and its retries, one query per name, the cap on queries in flight, a silent name that delays no
other, CNAME chains and loops, AAAA-only names, the SSRF guard on what a name resolves to."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from twisted.internet.error import DNSLookupError

from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.politeness import resolver as R
from larbinscrapy.politeness.dns import DnsCache, PinnedResolver, SsrfGuard, parse_networks
from larbinscrapy.politeness.ipsites import DNS, SSRF, IpTable, Politeness
from larbinscrapy.reactor import installed_reactor
from tests.support.dnsserver import DnsServer, Name
from tests.support.wait import run_loop, wait_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    from twisted.internet.defer import Deferred

PUBLIC = "93.184.216.34"


class Stats:
    """What Politeness needs of Scrapy's stats collector."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] = self.values.get(key, start) + count


def outcome(d: Deferred[Any]) -> list[Any]:
    got: list[Any] = []
    d.addCallbacks(got.append, lambda f: got.append(f.value))
    return got


def settle(*results: list[Any], timeout: float = 20) -> None:
    wait_for(lambda: all(results), timeout, "the DNS answers", pause=run_loop)


@pytest.fixture
def zone() -> dict[str, Name]:
    return {
        "ok.test": Name(a=[PUBLIC], ttl=77),
        "short.test": Name(a=[PUBLIC], ttl=1),
        "long.test": Name(a=[PUBLIC], ttl=10**6),
        "six.test": Name(aaaa=["2606:4700::1111"], ttl=50),
        "both.test": Name(a=[PUBLIC], aaaa=["2606:4700::1111"]),
        "alias.test": Name(cname="hop.test", ttl=40, alone=True),  # hop.test asked next
        "hop.test": Name(cname="ok.test", ttl=60),
        "loop1.test": Name(cname="loop2.test"),
        "loop2.test": Name(cname="loop1.test"),
        "servfail.test": Name(rcode="SERVFAIL"),
        "refused.test": Name(rcode="REFUSED"),
        "empty.test": Name(),
        "silent.test": Name(silent=True),
        "big.test": Name(a=[PUBLIC], truncate=True),
        "intranet.test": Name(a=["10.1.2.3"]),
        "metadata.test": Name(cname="ok2.test"),
        "ok2.test": Name(a=["169.254.169.254"]),
        "xn--bcher-kva.test": Name(a=[PUBLIC]),
    }


@pytest.fixture
def dns(zone: dict[str, Name]) -> Iterator[DnsServer]:
    with DnsServer(zone) as server:
        yield server


def cache(dns: DnsServer, **kwargs: Any) -> DnsCache:
    return cache_at(dns.server, **kwargs)


def cache_at(server: str, **kwargs: Any) -> DnsCache:
    kwargs = {
        "ttl_min": 0.0,
        "ttl_max": 3600.0,
        "negative_ttl": 60.0,
        "timeout": 5.0,
        "retries": 0,
        **kwargs,
    }
    return DnsCache(installed_reactor(), servers=[server], **kwargs)


def gate(c: DnsCache, allowed: str = "") -> Politeness:
    table = IpTable(0.0, 1, max_failures=3, backoff=1.0)
    return Politeness(table, Stats(), c, SsrfGuard(True, parse_networks(allowed)))


def resolve_all(c: DnsCache, *names: str) -> list[Any]:
    results = [outcome(c.resolve(name)) for name in names]
    settle(*results)
    return [r[0] for r in results]


def test_each_outcome_and_its_stat(dns):
    c = cache(dns)
    p = gate(c)
    names = [
        "ok.test",
        "nowhere.test",
        "servfail.test",
        "refused.test",
        "empty.test",
        "loop1.test",
        "a" * 254 + ".test",
    ]
    got = dict(zip(names, resolve_all(c, *names), strict=True))
    assert got["ok.test"] == PUBLIC
    expected = {
        "nowhere.test": R.NXDOMAIN,
        "servfail.test": R.SERVFAIL,
        "refused.test": R.REFUSED,
        "empty.test": R.NODATA,
        "loop1.test": R.CNAME_LOOP,
    }
    for name, why in expected.items():
        assert isinstance(got[name], R.DnsError) and got[name].outcome == why, name
    assert got["a" * 254 + ".test"].outcome == R.BAD_NAME
    stats = p.stats.values
    for why in (*expected.values(), R.BAD_NAME):
        assert stats[f"larbin/dns/{why}"] == 1, why
    assert stats["larbin/dns/answered"] == 1
    assert c.resolve("ok.test").called and stats["larbin/dns/cached"] == 1


def test_a_silent_name_times_out_and_delays_no_other(dns):
    c = cache(dns, max_in_flight=2, timeout=1.5)
    p = gate(c)
    done: list[str] = []
    for name in ("silent.test", "ok.test", "alias.test", "six.test", "both.test"):
        c.resolve(name).addBoth(lambda _, n=name: done.append(n))
    wait_for(lambda: len(done) == 5, 20, "every name", pause=run_loop)
    assert done[-1] == "silent.test"  # behind the cap too, the others overtook it
    assert p.stats.values["larbin/dns/timeout"] == 1


def test_ttl_honoured_within_the_bounds(dns):
    c = cache(dns, ttl_min=30.0, ttl_max=3600.0)
    resolve_all(c, "ok.test", "short.test", "long.test", "alias.test")
    expiry = {
        name: c._entries[name][0] - c._clock()
        for name in ("ok.test", "short.test", "long.test", "alias.test")
    }
    assert 70 < expiry["ok.test"] <= 77
    assert 25 < expiry["short.test"] <= 30  # 1 s raised to the minimum
    assert 3590 < expiry["long.test"] <= 3600  # cut to the maximum
    assert 35 < expiry["alias.test"] <= 40  # the lowest TTL along the chain


def test_cname_chain_followed_and_aaaa_only_names(dns):
    c = cache(dns)
    p = gate(c)
    assert resolve_all(c, "alias.test", "six.test", "both.test") == [
        PUBLIC,
        "2606:4700::1111",
        PUBLIC,
    ]
    assert dns.queries[("six.test", "AAAA")] == 1 and dns.queries[("both.test", "AAAA")] == 0
    assert p.stats.values["larbin/dns/cname"] == 1 and p.stats.values["larbin/dns/ipv6"] == 1


def test_truncated_answer_asked_again_over_tcp(dns):
    assert resolve_all(cache(dns), "big.test") == [PUBLIC]


def test_one_query_per_name_in_flight(dns):
    c = cache(dns)
    results = [outcome(c.resolve(name)) for name in ["ok.test", "OK.test", "ok.test"]]
    settle(*results)
    assert [r[0] for r in results] == [PUBLIC] * 3
    assert dns.queries[("ok.test", "A")] == 1 and c.lookups == 1


def test_cap_on_queries_in_flight(dns, zone):
    for i in range(6):
        zone[f"slow{i}.test"] = Name(a=[PUBLIC], delay=0.3)
    c = cache(dns, max_in_flight=2)
    results = [outcome(c.resolve(f"slow{i}.test")) for i in range(6)]
    most = 0
    while not all(results):
        most = max(most, c._sent)
        run_loop(0.02)
    assert most == 2 and [r[0] for r in results] == [PUBLIC] * 6


def test_failures_cached_negatively_then_asked_again(dns):
    c = cache(dns, negative_ttl=0.5)
    assert resolve_all(c, "nowhere.test")[0].outcome == R.NXDOMAIN
    cached = resolve_all(c, "nowhere.test")[0]
    assert isinstance(cached, DNSLookupError) and cached.outcome == "nxdomain (cached)"
    assert dns.queries[("nowhere.test", "A")] == 1
    wait_for(lambda: c.cached("nowhere.test") is False, 5, "the expiry", pause=run_loop)
    resolve_all(c, "nowhere.test")
    assert dns.queries[("nowhere.test", "A")] == 2


def test_temporary_failures_retried_with_backoff_then_answered(dns, zone):
    """A resolver that stops answering mid-crawl: names wait for it instead of failing."""
    c = cache(dns, timeout=0.5, retries=3, retry_delay=0.2)
    p = gate(c)
    dns.stopped = True
    got = outcome(c.resolve("ok.test"))
    wait_for(
        lambda: p.stats.values.get("larbin/dns/retried", 0) >= 1, 10, "a retry", pause=run_loop
    )
    assert got == []
    dns.stopped = False
    settle(got)
    assert got == [PUBLIC]


def test_servfail_retried_then_counted_once(dns):
    c = cache(dns, retries=2, retry_delay=0.05)
    p = gate(c)
    assert resolve_all(c, "servfail.test")[0].outcome == R.SERVFAIL
    assert p.stats.values["larbin/dns/retried"] == 2
    assert p.stats.values["larbin/dns/servfail"] == 1 and c.failures == 1


def test_host_whose_address_changes_at_its_ttl(dns, zone):
    zone["moving.test"] = Name(a=["93.184.216.1"], ttl=1)
    c = cache(dns)
    assert resolve_all(c, "moving.test") == ["93.184.216.1"]
    zone["moving.test"] = Name(a=["93.184.216.2"], ttl=1)
    assert resolve_all(c, "moving.test") == ["93.184.216.1"]  # within its TTL
    wait_for(lambda: c.cached("moving.test") is False, 5, "the TTL", pause=run_loop)
    assert resolve_all(c, "moving.test") == ["93.184.216.2"]


def test_names_of_253_characters_and_idns(dns, zone):
    long_name = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 56, "test"])
    assert len(long_name) == 253
    zone[long_name] = Name(a=[PUBLIC])
    c = cache(dns)
    assert resolve_all(c, long_name, "bücher.test") == [PUBLIC, PUBLIC]  # IDN: punycode
    bad = resolve_all(c, long_name + "x", "x" * 64 + ".test", "a..test", "\udcff.test")
    assert [e.outcome for e in bad] == [R.BAD_NAME] * 4
    assert sum(dns.queries.values()) == 2  # bad names never reach the server


def test_ssrf_guard_on_every_resolved_address(dns):
    c = cache(dns)
    p = gate(c)
    results = [
        outcome(p.resolve(n)) for n in ("intranet.test", "metadata.test", "ok.test", "nowhere.test")
    ]
    settle(*results)
    got = [r[0] for r in results]
    assert [getattr(g, "reason", g) for g in got] == [SSRF, SSRF, PUBLIC, DNS]
    assert all(isinstance(g, DroppedRequest) for g in got[:2])
    resolver = PinnedResolver(installed_reactor(), c, SsrfGuard())
    pinned = outcome(resolver.getHostByName("metadata.test"))
    settle(pinned)
    assert isinstance(pinned[0], DNSLookupError) and "SSRF" in str(pinned[0])


def test_prefetch_resolves_ahead_and_counts_once(dns):
    c = cache(dns)
    p = gate(c)
    p.prefetch("ok.test")
    p.prefetch("ok.test")
    assert c.in_flight("ok.test")
    wait_for(lambda: c.cached("ok.test") == PUBLIC, 10, "the answer", pause=run_loop)
    assert p.cached_ip("ok.test") == PUBLIC and dns.queries[("ok.test", "A")] == 1
    assert p.stats.values["larbin/dns/lookups"] == 1


def test_names_asked_ahead_are_not_forgotten_before_their_turn(dns, zone):
    """A million seeds are admitted in the crawl's first minutes, far more names than the
    table keeps: names are asked ahead only while the ones already asked for fit in it, so
    none is forgotten and asked again at its turn (at 100,000 hosts 2.3 queries a live host
    were sent for 1.4 before)."""
    names = [f"h{n}.test" for n in range(100)]
    for name in names:
        zone[name] = Name(a=[PUBLIC], ttl=3600)
    c = cache(dns, max_entries=40)
    p = gate(c)
    for name in names:  # the seeds, admitted in one go
        p.prefetch(name)
    wait_for(lambda: not any(c.in_flight(n) for n in names), 10, "the answers", pause=run_loop)
    asked_ahead = sum(dns.queries.get((n, "A"), 0) for n in names)
    assert 0 < asked_ahead <= 40 // 4
    for name in names:  # their turns, in the order they were admitted
        assert resolve_all(c, name) == [PUBLIC]
    assert {n: dns.queries[(n, "A")] for n in names} == dict.fromkeys(names, 1)
    assert len(c) <= 40


def test_a_name_used_from_the_cache_makes_room_to_ask_ahead(dns, zone):
    """A Redis worker takes a leased host's address from the cache (``cached_ip``), without
    asking again: that is its turn too, or the names asked ahead fill their quarter of the
    table and no later host is asked ahead."""
    zone["next.test"] = Name(a=[PUBLIC], ttl=3600)
    c = cache(dns, max_entries=4)  # one name ahead at a time
    p = gate(c)
    p.prefetch("ok.test")
    wait_for(lambda: c.cached("ok.test") == PUBLIC, 10, "the answer", pause=run_loop)
    p.prefetch("long.test")  # no room: asked at its turn
    assert not c.in_flight("long.test") and c.cached("long.test") is False
    assert p.cached_ip("ok.test") == PUBLIC  # ok.test's turn
    p.prefetch("next.test")
    assert c.in_flight("next.test")


def test_a_name_asked_ahead_outlives_a_purge_of_names_used_since(dns, zone):
    """The table forgets its older half when full; a name asked ahead and not yet used stays,
    however many names were looked up at their turn meanwhile."""
    names = [f"n{n}.test" for n in range(70)]
    for name in names:
        zone[name] = Name(a=[PUBLIC], ttl=3600)
    c = cache(dns, max_entries=40)
    p = gate(c)
    p.prefetch("ok.test")
    wait_for(lambda: c.cached("ok.test") == PUBLIC, 10, "the answer", pause=run_loop)
    assert resolve_all(c, *names) == [PUBLIC] * 70  # the table was purged on the way
    assert c.cached("ok.test") == PUBLIC
    assert resolve_all(c, "ok.test") == [PUBLIC] and dns.queries[("ok.test", "A")] == 1


def test_every_kind_of_name_of_the_simulated_internet():
    """The simulated internet's DNS (testweb/internet/dns.py): each name's outcome is the one
    its generator gave it (CNAME chains, AAAA only, answers truncated over UDP, failures)."""
    from testweb.internet.dns import DnsThread
    from testweb.internet.model import Internet, Mix

    mix = Mix(
        nxdomain=0.1,
        servfail=0.1,
        silent_dns=0.05,
        cname=0.3,
        aaaa_only=0.1,
        big_answer=0.1,
        dead=0,
        tarpit=0,
        https=0,
        www=0,
    )
    web = Internet(200, 7, base="127.24.8.0", mix=mix)
    hosts = [web.host(i) for i in range(200)]
    with DnsThread(web, "127.24.0.2", 0, latency=False) as dns:
        c = cache_at(f"{dns.address}:{dns.port}", timeout=3.0)
        got = resolve_all(c, *(h.name for h in hosts))
    expected = {"nxdomain": R.NXDOMAIN, "servfail": R.SERVFAIL, "silent": R.TIMEOUT}
    kinds = set()
    for host, answer in zip(hosts, got, strict=True):
        if host.dns == "ok":
            assert answer in host.addresses, host
            kinds.add(
                ("cname" if host.cname else "")
                + host.family
                + ("big" if len(host.addresses) > 1 else "")
            )
        else:
            assert isinstance(answer, R.DnsError) and answer.outcome == expected[host.dns], host
            kinds.add(host.dns)
    assert {"4", "6", "cname4", "4big", "nxdomain", "servfail", "silent"} <= kinds


def test_a_resolver_that_stops_answering_loses_nothing_queued(dns, zone):
    """The frontier's hosts wait through an outage shorter than the retries, then are served."""
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from larbinscrapy.frontier.scheduler import LarbinScheduler
    from settings import base
    from tests.support.crawl import settings_of

    class Frontier(Spider):
        name = "frontier"

    names = [f"w{i}.test" for i in range(20)]
    for name in names:
        zone[name] = Name(a=[PUBLIC])
    crawler = get_crawler(Frontier, settings_of(base, DOWNLOAD_DELAY=0))
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(Frontier())
    c = cache(dns, timeout=0.3, retries=4, retry_delay=0.2)
    p = sched.politeness  # the frontier's own (no engine here): given DNS and the guard
    p.dns, p.guard = c, SsrfGuard(enabled=False)
    c.add_listener(p._count_dns_event)
    stats = crawler.stats
    try:
        dns.stopped = True
        for name in names:
            sched.enqueue_request(Request(f"http://{name}/"))
        wait_for(
            lambda: (stats.get_value("larbin/dns/retried") or 0) >= 20,
            20,
            "every name asked again",
            pause=run_loop,
        )
        dns.stopped = False
        got: list[str] = []

        def drained() -> bool:
            while (request := sched.next_request()) is not None:
                got.append(request.url)
                sched.table.release(sched.table.get(PUBLIC))
            return len(got) == len(names)

        wait_for(drained, 20, "every queued URL", pause=run_loop)
        assert sorted(got) == sorted(f"http://{name}/" for name in names)
        assert stats.get_value("larbin/dropped/dns") is None
        assert stats.get_value("larbin/dns/answered") == len(names)
    finally:
        sched.close("finished")


def test_answers_are_kept_once_not_again_inside_c_ares():
    """A broad crawl asks a million names an hour. c-ares keeps every answer for its TTL in a
    query cache of its own (on by default since c-ares 1.23, ~1.1 KB a name), beside ours,
    which holds what the crawl needs in a few hundred bytes: 20,000 names must leave no
    20 MB of C heap behind once our cache has let them go."""
    from tests.support.heap import c_heap_in_use
    from testweb.internet.dns import DnsThread
    from testweb.internet.model import Internet, Mix

    n = 20_000
    web = Internet(n, 3, base="127.24.16.0", mix=Mix.none())
    with DnsThread(web, "127.24.0.3", 0, latency=False) as dns:
        c = cache_at(f"{dns.address}:{dns.port}", max_entries=1000)  # ours stays small
        resolve_all(c, *(web.host(i).name for i in range(500)))  # the channel is set up
        before = c_heap_in_use()
        for start in range(500, n, 500):
            got = resolve_all(c, *(web.host(i).name for i in range(start, start + 500)))
            assert all(isinstance(ip, str) for ip in got)
        held = c_heap_in_use() - before
    assert held < 8 * 2**20, f"{held / 2**20:.1f} MB of C heap held after {n:,} names"


def test_answers_that_arrive_while_the_crawl_is_busy_are_kept(dns, zone):
    """The reactor thread is busy now and then (a big page parsed, a checkpoint written) while
    hundreds of lookups are in flight: their answers wait in the UDP socket meanwhile. The
    kernel's default receive buffer holds ~256 of them and drops the rest, and c-ares asks
    those names again a timeout later, into the next burst (a million-host crawl: about half of
    the datagrams dropped in its namespace were answers to the crawler). The channel's socket
    is sized for the lookups in flight: every answer is read, no name asked twice."""
    # more than the default buffer holds (256), fewer than a stock kernel's cap grants
    # (net.core.rmem_max 208 KB, doubled: 512)
    names = [f"busy{i}.test" for i in range(450)]
    for name in names:
        zone[name] = Name(a=[PUBLIC])
    c = cache(dns, max_in_flight=1000)
    resolve_all(c, "ok.test")  # the channel and its socket are set up
    results = []
    for start in range(0, len(names), 90):  # a pace the server keeps up with
        results += [outcome(c.resolve(name)) for name in names[start : start + 90]]
        time.sleep(0.05)  # the reactor thread busy: the answers wait in the socket
    time.sleep(0.3)
    settle(*results)
    assert [r[0] for r in results] == [PUBLIC] * len(names)
    twice = sorted(name for name in names if dns.queries[(name, "A")] > 1)
    assert not twice, f"{len(twice)} names asked again: {twice[:5]}"


def test_a_resolver_that_loses_answers_gets_more_tries_before_a_host_is_dropped(dns, zone):
    """An overloaded resolver (a broad crawl's own bursts, a busy upstream) drops queries, and
    a live name can go unanswered at every one of a short series of tries: its host was
    dropped as a DNS failure although its own name never failed. Once another name was
    answered on a later try (the resolver loses answers), a name that timed out is asked
    ``lossy_retries`` times more; on a resolver that loses nothing a silent name costs its own
    ``retries`` alone."""
    # tries (timeout 0.3 s): at 0 and 0.5 s (0.2 s later), then, while lossy, at 1.2 s (0.4)
    zone["flaky.test"] = Name(a=[PUBLIC], lost_for=0.35)  # answered at its second try
    zone["unlucky.test"] = Name(a=[PUBLIC], lost_for=1.0)  # at neither of its first two
    kw = {"timeout": 0.3, "retries": 1, "retry_delay": 0.2, "lossy_retries": 2}
    calm = cache(dns, **kw)
    calm_gate = gate(calm)  # its stats (it listens while it lives)
    calm_stats = calm_gate.stats.values
    assert resolve_all(calm, "silent.test")[0].outcome == R.TIMEOUT
    assert calm_stats["larbin/dns/retried"] == 1  # its try and one again: nothing lost so far

    c = cache(dns, **kw)
    lossy_gate = gate(c)
    stats = lossy_gate.stats.values
    flaky, unlucky = outcome(c.resolve("flaky.test")), outcome(c.resolve("unlucky.test"))
    settle(flaky, unlucky)
    assert flaky == [PUBLIC] and unlucky == [PUBLIC], unlucky
    assert stats["larbin/dns/retried"] == 3 and "larbin/dns/timeout" not in stats, stats
    # the resolver is losing answers: a name that never answers gets the extra tries, then fails
    assert resolve_all(c, "silent.test")[0].outcome == R.TIMEOUT
    assert stats["larbin/dns/retried"] == 3 + 3 and stats["larbin/dns/timeout"] == 1, stats
    assert stats["larbin/dns/lossy_retried"] == 1 + 2, stats  # unlucky's one, silent's two
    assert "larbin/dns/lossy_retried" not in calm_stats
    # a SERVFAIL is an answer, not one lost: its own tries alone
    assert resolve_all(c, "servfail.test")[0].outcome == R.SERVFAIL
    assert stats["larbin/dns/retried"] == 3 + 3 + 1, stats
