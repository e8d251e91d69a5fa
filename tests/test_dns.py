"""DnsCache, PinnedResolver and the SSRF guard, without a network: a Clock for time and a
resolver function whose answers the test gives (the one thing standing in for real DNS)."""

from __future__ import annotations

import pytest
from twisted.internet import defer, task
from twisted.internet.error import DNSLookupError

from larbinscrapy.politeness.dns import (
    DnsCache,
    PinnedResolver,
    SsrfGuard,
    parse_networks,
    parse_resolve,
)


class Answers:
    """A DNS server the test controls: each query is a Deferred the test fires."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, defer.Deferred[str]]] = []

    def __call__(self, host: str) -> defer.Deferred[str]:
        d: defer.Deferred[str] = defer.Deferred()
        self.queries.append((host, d))
        return d


def outcome(d: defer.Deferred[str]) -> list[object]:
    """What ``d`` gave so far: [] (pending), [ip] or [exception]."""
    got: list[object] = []
    d.addCallbacks(got.append, lambda f: got.append(f.value))
    return got


@pytest.fixture
def clock() -> task.Clock:
    return task.Clock()


@pytest.fixture
def answers() -> Answers:
    return Answers()


def make_cache(clock, answers, **kwargs) -> DnsCache:
    return DnsCache(clock, clock=clock.seconds, lookup=answers, **kwargs)


def test_concurrent_lookups_of_one_host_share_one_query(clock, answers):
    cache = make_cache(clock, answers)
    first, second = outcome(cache.resolve("a.test")), outcome(cache.resolve("A.TEST"))
    assert [h for h, _ in answers.queries] == ["a.test"]
    assert first == second == []
    answers.queries[0][1].callback("93.184.216.34")
    assert first == second == ["93.184.216.34"]
    assert cache.lookups == 1


def test_answer_kept_for_the_ttl_then_looked_up_again(clock, answers):
    cache = make_cache(clock, answers, ttl=60)
    outcome(cache.resolve("a.test"))
    answers.queries[0][1].callback("93.184.216.34")
    clock.advance(59)
    assert outcome(cache.resolve("a.test")) == ["93.184.216.34"]
    assert len(answers.queries) == 1
    clock.advance(2)
    assert cache.cached("a.test") is False
    again = outcome(cache.resolve("a.test"))
    assert len(answers.queries) == 2 and again == []
    answers.queries[1][1].callback("93.184.216.35")
    assert again == ["93.184.216.35"]
    assert cache.lookups == 2


def test_failure_is_cached_too(clock, answers):
    cache = make_cache(clock, answers, ttl=60)
    first = outcome(cache.resolve("gone.test"))
    answers.queries[0][1].errback(DNSLookupError("gone.test"))
    assert isinstance(first[0], DNSLookupError)
    assert cache.cached("gone.test") is None
    second = outcome(cache.resolve("gone.test"))
    assert isinstance(second[0], DNSLookupError)
    assert len(answers.queries) == 1 and cache.failures == 1
    clock.advance(61)
    outcome(cache.resolve("gone.test"))
    assert len(answers.queries) == 2


def test_a_lookup_that_never_answers_times_out_and_counts_as_failed(clock, answers):
    cache = make_cache(clock, answers, timeout=5)
    got = outcome(cache.resolve("silent.test"))
    clock.advance(4.9)
    assert got == []
    clock.advance(0.2)
    assert isinstance(got[0], DNSLookupError)
    assert cache.cached("silent.test") is None and cache.failures == 1


def test_overrides_answer_without_a_query_and_count_as_lookups(clock, answers):
    cache = make_cache(clock, answers, overrides=parse_resolve('{"H01.test": "127.0.1.2"}'))
    got = outcome(cache.resolve("h01.TEST"))
    clock.advance(0)
    assert got == ["127.0.1.2"]
    assert answers.queries == [] and cache.lookups == 1
    assert outcome(cache.resolve("h01.test")) == ["127.0.1.2"] and cache.lookups == 1


def test_ip_literals_need_no_lookup(clock, answers):
    cache = make_cache(clock, answers)
    assert outcome(cache.resolve("10.0.0.1")) == ["10.0.0.1"]
    assert outcome(cache.resolve("[::1]")) == ["::1"]
    assert answers.queries == [] and cache.lookups == 0


def test_parse_resolve_forms():
    assert parse_resolve("a.test:127.0.0.2, B.test:127.0.0.3") == {
        "a.test": "127.0.0.2",
        "b.test": "127.0.0.3",
    }
    assert parse_resolve({"a.test": "::1"}) == {"a.test": "::1"}
    assert parse_resolve("") == {}
    with pytest.raises(ValueError, match="999"):
        parse_resolve({"a.test": "127.0.0.999"})


@pytest.mark.parametrize(
    ("ip", "refused"),
    [
        ("93.184.216.34", False),
        ("10.0.0.1", True),
        ("172.16.5.4", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("127.0.1.2", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),  # multicast
        ("240.0.0.1", True),  # reserved
        ("::1", True),
        ("fd00::1", True),
        ("2606:4700::1111", False),
    ],
)
def test_ssrf_guard(ip, refused):
    assert SsrfGuard().refuses(ip) is refused
    assert SsrfGuard(enabled=False).refuses(ip) is False


def test_ssrf_guard_allowed_networks():
    guard = SsrfGuard(allowed=parse_networks("127.0.0.0/8"))
    assert not guard.refuses("127.0.1.2")
    assert guard.refuses("10.0.0.1") and guard.refuses("169.254.169.254")
    assert SsrfGuard(allowed=parse_networks("")).refuses("127.0.1.2")


def test_pinned_resolver_refuses_what_the_guard_refuses(clock, answers):
    cache = make_cache(clock, answers, overrides={"meta.test": "169.254.169.254"})
    resolver = PinnedResolver(clock, cache, SsrfGuard(allowed=parse_networks("127.0.0.0/8")))
    refused = outcome(resolver.getHostByName("meta.test"))
    allowed = outcome(resolver.getHostByName("127.0.0.7"))
    clock.advance(0)
    assert isinstance(refused[0], DNSLookupError) and "SSRF" in str(refused[0])
    assert allowed == ["127.0.0.7"]


def test_expired_answers_are_forgotten_so_memory_follows_the_ttl(clock, answers, monkeypatch):
    # A broad crawl meets millions of hosts once each: the table must not keep them all.
    # (The first purge comes at 10,000 entries; 100 here keeps twisted's test Clock quick.)
    monkeypatch.setattr("larbinscrapy.politeness.dns._PURGE_MIN", 100)
    cache = make_cache(clock, answers, ttl=60, overrides={})
    for i in range(120):
        cache.resolve(f"h{i}.test")
    for _, d in answers.queries:
        d.callback("93.184.216.34")
    assert len(cache) == 120  # all within one TTL: all kept
    answers.queries.clear()
    clock.advance(61)
    for i in range(120, 360):  # the table doubles again: expired answers are purged
        cache.resolve(f"h{i}.test")
    for _, d in answers.queries:
        d.callback("93.184.216.34")
    assert len(cache) <= 240
    assert isinstance(cache.cached("h300.test"), str)
    assert cache.cached("h1.test") is False  # expired and forgotten: looked up again if met
