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


class Heard:
    """A listener of the cache's events."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def event(self, event: str) -> None:
        self.events.append(event)


def test_listeners_end_with_their_crawl(clock, answers):
    cache = make_cache(clock, answers, overrides={"a.test": "93.184.216.34"})
    kept, gone = Heard(), Heard()
    cache.add_listener(kept.event)
    cache.add_listener(gone.event)
    del gone
    cache.resolve("a.test")
    clock.advance(0)
    cache.resolve("a.test")
    assert kept.events == ["cached"] and len(cache._listeners) == 1


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


def test_pinned_resolver_connects_where_the_checks_saw_even_past_the_ttl(clock, answers):
    cache = make_cache(clock, answers, ttl=60)
    resolver = PinnedResolver(clock, cache, SsrfGuard(enabled=False))
    seen = outcome(cache.resolve("moving.test"))  # the politeness check's lookup
    answers.queries[0][1].callback("93.184.216.1")
    assert seen == ["93.184.216.1"]
    clock.advance(61)  # the TTL runs out before the connection is made
    assert outcome(resolver.getHostByName("moving.test")) == ["93.184.216.1"]
    assert len(answers.queries) == 1  # no lookup behind the checks' back
    refreshed = outcome(cache.resolve("moving.test"))  # the next check asks again...
    answers.queries[1][1].callback("93.184.216.2")
    assert refreshed == ["93.184.216.2"]
    assert outcome(resolver.getHostByName("moving.test")) == ["93.184.216.2"]  # ...and is followed


NAME_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("Example.COM.", "example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        (NAME_253, NAME_253),
        (NAME_253 + "x", None),  # 254 characters
        ("a" * 64 + ".example", None),
        ("a..example", None),
        ("", None),
        ("\udcff.example", None),
    ],
)
def test_query_name(host, name):
    from larbinscrapy.politeness.resolver import BAD_NAME, DnsError, query_name

    if name is not None:
        assert query_name(host) == name
        return
    with pytest.raises(DnsError) as raised:
        query_name(host)
    assert raised.value.outcome == BAD_NAME


def test_answer_ttl_bounded_failures_kept_their_own_time(clock, answers):
    from larbinscrapy.politeness.resolver import NXDOMAIN, Answer, DnsError

    cache = make_cache(clock, answers, ttl_min=30, ttl_max=600, negative_ttl=120)
    for name in ("short.test", "long.test", "gone.test"):
        cache.resolve(name)
    answers.queries[0][1].callback(Answer("93.184.216.1", 1))
    answers.queries[1][1].callback(Answer("93.184.216.2", 10**6))
    answers.queries[2][1].errback(DnsError("gone.test", NXDOMAIN))
    clock.advance(29)
    assert cache.cached("short.test") == "93.184.216.1"  # 1 s raised to 30
    clock.advance(2)
    assert cache.cached("short.test") is False
    assert cache.cached("gone.test") is None
    clock.advance(90)
    assert cache.cached("gone.test") is False  # asked again after 120 s
    assert cache.cached("long.test") == "93.184.216.2"
    clock.advance(600)
    assert cache.cached("long.test") is False  # 10**6 s cut to 600


def test_temporary_failure_retried_with_doubling_backoff(clock, answers):
    from larbinscrapy.politeness.resolver import SERVFAIL, DnsError

    cache = make_cache(clock, answers, retries=2, retry_delay=5)
    heard = Heard()
    cache.add_listener(heard.event)
    events = heard.events
    got = outcome(cache.resolve("flaky.test"))
    answers.queries[0][1].errback(DnsError("flaky.test", SERVFAIL))
    clock.advance(4.9)
    assert len(answers.queries) == 1
    clock.advance(0.1)
    assert len(answers.queries) == 2
    answers.queries[1][1].errback(DnsError("flaky.test", SERVFAIL))
    clock.advance(9.9)
    assert len(answers.queries) == 2 and got == []
    clock.advance(0.1)
    answers.queries[2][1].errback(DnsError("flaky.test", SERVFAIL))
    assert isinstance(got[0], DnsError) and got[0].outcome == SERVFAIL
    assert events == ["retried", "retried", SERVFAIL] and cache.failures == 1


def test_cap_on_queries_in_flight_and_the_timeout_starts_when_sent(clock, answers):
    cache = make_cache(clock, answers, max_in_flight=2, timeout=5)
    got = [outcome(cache.resolve(f"h{i}.test")) for i in range(4)]
    assert [h for h, _ in answers.queries] == ["h0.test", "h1.test"]
    clock.advance(4)
    answers.queries[0][1].callback("93.184.216.1")
    assert [h for h, _ in answers.queries] == ["h0.test", "h1.test", "h2.test"]
    clock.advance(1.5)  # h1 timed out (5 s); h2, sent 1.5 s ago, did not
    assert isinstance(got[1][0], DNSLookupError) and got[2] == []
    assert [h for h, _ in answers.queries][-1] == "h3.test"


def test_settings_deprecated_fixed_ttl_and_servers():
    from scrapy.settings import Settings

    from larbinscrapy.politeness.dns import parse_servers
    from tests.support.crawl import LARBIN_DEFAULTS

    cache = DnsCache.from_settings(Settings(LARBIN_DEFAULTS), task.Clock())
    assert (cache.rules.ttl_min, cache.rules.ttl_max) == (300, 86400)
    with pytest.warns(DeprecationWarning, match="LARBIN_DNS_TTL"):
        cache = DnsCache.from_settings(
            Settings({**LARBIN_DEFAULTS, "LARBIN_DNS_TTL": 60}), task.Clock()
        )
    assert (cache.rules.ttl_min, cache.rules.ttl_max) == (60, 60)
    assert parse_servers("127.24.0.1, 127.24.0.2:5353,[::1]:53") == (
        "127.24.0.1",
        "127.24.0.2:5353",
        "[::1]:53",
    )
    with pytest.raises(ValueError, match="nameserver"):
        parse_servers("nameserver.test")


def test_hosts_file(tmp_path):
    from larbinscrapy.politeness.resolver import hosts_file

    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 localhost vm # comment\n::1 localhost ip6-localhost\nbad line\n")
    assert hosts_file(str(path)) == {
        "localhost": "127.0.0.1",
        "vm": "127.0.0.1",
        "ip6-localhost": "::1",
    }
    assert hosts_file(str(tmp_path / "none")) == {}


def test_the_frontier_asks_for_a_host_when_its_first_url_is_admitted(tmp_path, answers):
    """larbin: DNS once per site, ahead of its turn; not when the site's first URL is due."""
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from larbinscrapy.frontier.scheduler import LarbinScheduler
    from larbinscrapy.politeness.ipsites import IpTable, Politeness
    from settings import base
    from tests.support.crawl import settings_of

    class Frontier(Spider):
        name = "frontier"

    crawler = get_crawler(
        Frontier,
        settings_of(
            base,
            LARBIN_FRONTIER_LOADED_SITES_MAX=1,
            LARBIN_FRONTIER_URLS_PER_SITE_MAX=1,
            DOWNLOAD_DELAY=0,
        ),
    )
    sched = LarbinScheduler.from_crawler(crawler)
    sched.open(Frontier())
    clock = task.Clock()
    dns = DnsCache(clock, clock=clock.seconds, lookup=answers)
    sched.politeness = Politeness(
        IpTable(0.0, 1, max_failures=3, backoff=1.0), crawler.stats, dns, SsrfGuard(enabled=False)
    )
    try:
        for host in ("a.test", "b.test", "c.test", "a.test"):
            sched.enqueue_request(Request(f"http://{host}/x"))
        # one site in memory at most: b and c wait on disk, their names asked already
        assert [h for h, _ in answers.queries] == ["a.test", "b.test", "c.test"]
        assert crawler.stats.get_value("larbin/dns/lookups") == 3
        # 4 names in flight at most ahead of their turn: d, not e
        dns.rules = dns.rules._replace(max_in_flight=1)
        for host in ("d.test", "e.test"):
            sched.enqueue_request(Request(f"http://{host}/x"))
        assert dns.in_flight("d.test") and not dns.in_flight("e.test")
    finally:
        sched.close("finished")


def test_names_on_one_shared_address_keep_one_string_of_it(clock, answers):
    """Shared hosting puts thousands of names on one address: each answer arrives as its own
    string, the cache keeps one (a broad crawl holds its answers for their TTL)."""
    cache = make_cache(clock, answers)
    for n in range(3):
        outcome(cache.resolve(f"h{n}.test"))
    for _, d in answers.queries:
        d.callback(".".join(["203", "0", "113", "7"]))  # a new str each time
    kept = [cache.pinned(f"h{n}.test") for n in range(3)]
    assert kept == ["203.0.113.7"] * 3
    assert kept[0] is kept[1] is kept[2]


def test_a_broad_crawl_keeps_a_bounded_number_of_names(answers):
    """A broad crawl meets a million hosts an hour, each answer with an hour's TTL: the cache
    built from the default settings keeps at most LARBIN_DNS_CACHE_MAX names (older ones go,
    counted), and a forgotten name is asked again when it is met again."""
    from scrapy.utils.test import get_crawler

    from tests.support.crawl import LARBIN_DEFAULTS

    settings = get_crawler(settings_dict=LARBIN_DEFAULTS).settings
    cap = settings.getint("LARBIN_DNS_CACHE_MAX")
    cache = DnsCache.from_settings(settings, task.Clock())
    cache._lookup = answers  # the test's DNS server
    heard = Heard()
    cache.add_listener(heard.event)
    names = [f"h{n}.test" for n in range(150_000)]
    for n, name in enumerate(names):
        got = outcome(cache.resolve(name))
        answers.queries[-1][1].callback(f"10.0.{n // 256 % 256}.{n % 256}")
        assert got == [f"10.0.{n // 256 % 256}.{n % 256}"]
    assert len(cache) <= cap < len(names), f"{len(cache):,} names kept"
    assert heard.events.count("evicted") == len(names) - len(cache)
    assert (
        cache.cached(names[-1]) == f"10.0.{(len(names) - 1) // 256 % 256}.{(len(names) - 1) % 256}"
    )
    asked = len(answers.queries)
    outcome(cache.resolve(names[0]))  # forgotten: asked again
    assert len(answers.queries) == asked + 1 and answers.queries[-1][0] == names[0]


def test_an_answer_that_comes_after_the_frontier_closed_changes_nothing(tmp_path, answers):
    """A stop leaves lookups in flight: a failure heard after the frontier closed its files
    (a name that timed out) wrote to a closed file, a CRITICAL traceback in the log. It is
    now left alone: the resumed crawl asks for the name again, its URL still queued."""
    import gc

    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler
    from twisted.logger import globalLogPublisher

    from larbinscrapy.frontier.scheduler import LarbinScheduler
    from larbinscrapy.politeness.ipsites import IpTable, Politeness
    from larbinscrapy.politeness.resolver import TIMEOUT, DnsError
    from settings import base
    from tests.support.crawl import settings_of

    class Frontier(Spider):
        name = "frontier"

    clock = task.Clock()

    def opened() -> LarbinScheduler:
        crawler = get_crawler(
            Frontier, settings_of(base, JOBDIR=str(tmp_path / "job"), DOWNLOAD_DELAY=0)
        )
        sched = LarbinScheduler.from_crawler(crawler)
        sched.open(Frontier())
        sched.politeness = Politeness(
            IpTable(0.0, 1, max_failures=3, backoff=1.0),
            crawler.stats,
            DnsCache(clock, clock=clock.seconds, lookup=answers),
            SsrfGuard(enabled=False),
        )
        return sched

    errors: list[dict] = []
    globalLogPublisher.addObserver(errors.append)
    try:
        sched = opened()
        sched.enqueue_request(Request("http://late.test/x"))
        assert sched.next_request() is None  # its site in memory, waiting for the answer
        assert [h for h, _ in answers.queries] == ["late.test"]
        sched.close("shutdown")
        for _ in range(10):  # every try of the name times out, its back-offs run out
            for _, d in answers.queries:
                if not d.called:
                    d.errback(DnsError("late.test", TIMEOUT))
            clock.advance(3600)
        assert sched.stats.get_value("larbin/dns/failures")
        assert sched.dead_hosts == {}  # nothing of the closed frontier changed
        del sched
        answers.queries.clear()
        gc.collect()  # an unhandled failure is logged when its Deferred goes
    finally:
        globalLogPublisher.removeObserver(errors.append)
    assert [e["log_failure"].value for e in errors if "log_failure" in e] == []
    again = opened()
    try:
        assert len(again) == 1  # the URL is still queued: the name is asked for again
    finally:
        again.close("finished")
