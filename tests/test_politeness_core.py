"""The politeness core (``larbinscrapy.politeness.ipsites``) on a fake clock: no crawl, no reactor.

The lease a scheduler takes and gives back, the connection the send-time gate owns, a robots.txt
borrowing a lease, backoff after failures, the drop of an IP and of a host, and the listeners
the schedulers use instead of patching the table. The crawl tests (test_politeness.py) check
the same rules at the server; these catch a regression in milliseconds.
"""

from __future__ import annotations

import itertools
import logging

import pytest
from twisted.internet import defer, task
from twisted.internet.error import DNSLookupError

from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.politeness.dns import DnsCache, SsrfGuard, parse_networks
from larbinscrapy.politeness.hosts import ANSWERED
from larbinscrapy.politeness.ipsites import DNS, NOCONNECTION, SSRF, IpState, Politeness
from tests.support.cores import CountingStats, ManualClock, ip_table


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def core(clock: ManualClock, delay: float = 1.0, **options) -> Politeness:
    return Politeness.local(ip_table(delay, clock=clock, **options), CountingStats())


def test_lease_holds_the_ip_until_given_back_then_the_delay_runs(clock):
    p = core(clock, delay=1.0)
    st = p.table.get("10.0.0.1")
    assert p.table.wait(st, clock.now) == 0.0
    p.table.acquire(st)  # the scheduler leases the IP's one connection
    assert p.table.wait(st, clock.now) is None  # busy: no time makes it free
    p.fetch_ended(st.ip, release=False, failed=False)  # the response came back
    p.lease_returned(st.ip)
    assert st.busy == 0
    assert p.table.wait(st, clock.now) == pytest.approx(1.0)
    clock.now += 0.6
    assert p.table.wait(st, clock.now) == pytest.approx(0.4)
    assert not p.table.available(st, clock.now)
    clock.now += 0.4
    assert p.table.available(st, clock.now)


def test_own_connection_is_freed_when_the_fetch_ends(clock):
    p = core(clock, delay=0.5)
    st = p.table.get("10.0.0.1")
    p.table.acquire(st)  # taken by the send-time gate itself (no lease)
    p.fetch_ended(st.ip, release=True, failed=None)
    assert st.busy == 0 and st.ready_at == pytest.approx(clock.now + 0.5)


def test_borrowed_fetch_pushes_the_next_start_of_the_lease_holder(clock):
    p = core(clock, delay=1.0)
    st = p.table.get("10.0.0.1")
    p.table.acquire(st)  # a page's lease; its robots.txt goes first on the same lease
    p.fetch_ended(st.ip, release=False, failed=False)  # robots.txt done: no connection freed
    assert st.busy == 1
    # the page itself (holding the lease) must wait out the delay the borrowed fetch started
    assert p.table.next_start(st) - clock.now == pytest.approx(1.0)


def test_ip_connections_bound_the_fetches_open_at_once(clock):
    p = Politeness.local(ip_table(0.0, 4, clock=clock), CountingStats())
    st = p.table.get("10.0.0.1")
    for _ in range(4):
        assert p.table.available(st, clock.now)
        p.table.acquire(st)
    assert p.table.wait(st, clock.now) is None
    one = ip_table(0.1, clock=clock)  # LARBIN_IP_CONNECTIONS's default: one at a time
    st1 = one.get("10.0.0.1")
    one.acquire(st1)
    assert one.wait(st1, clock.now) is None


def test_the_ip_delay_paces_the_requests_so_a_slow_server_is_not_asked_less_often(clock):
    """``LARBIN_IP_DELAY`` as the crawl sets it (``from_start``): a server that takes 0.15 s
    to answer still gets a request every 0.25 s on its one connection, not every 0.4 s, the
    gap counted from when each request was written (a new connection's connect time is not
    taken off the gap); one slower than the delay gets the next when its answer ends; a
    request not known to be written, or a failure's back-off, rests the IP from the end. The
    bare table (a host as its own IP) keeps the delay from the end."""
    paced = ip_table(0.25, clock=clock, from_start=True)
    from_end = ip_table(0.25, clock=clock)
    cases = ((paced, 0.15, True, 0.25), (paced, 0.4, True, 0.4), (paced, 0.15, False, 0.4))
    for table, answer, known, gap in (*cases, (from_end, 0.15, True, 0.4)):
        st = table.get(f"10.0.{len(table.ips)}.{int(answer * 100)}")
        arrivals = []
        for n in range(4):
            clock.now += table.wait(st, clock.now) or 0.0
            assert table.available(st, clock.now)
            table.acquire(st)
            pacer = table.sent(st)
            assert table.wait(st, clock.now) is None  # its one connection is in use
            clock.now += 0.02 if n == 0 else 0.0  # the first opens a connection
            arrivals.append(clock.now)
            if pacer is not None and known:
                pacer(clock.now)  # the handler wrote it
            clock.now += answer
            written = pacer.at if pacer is not None else clock.now - answer
            table.finish(st, release=True, failed=False, written=written)
        assert [round(b - a, 6) for a, b in itertools.pairwise(arrivals)] == [gap] * 3
    st = paced.get("10.0.9.9")
    for failed in (False, True):  # it answered once: a failure now backs off
        paced.acquire(st)
        paced.sent(st)
        written = clock.now
        clock.now += 0.15
        paced.finish(st, release=True, failed=failed, written=written)
    assert paced.wait(st, clock.now) == pytest.approx(0.25 + paced.backoff)


def test_with_two_connections_the_next_request_waits_for_the_first_to_be_written(clock):
    """Two connections to an IP, ``LARBIN_IP_DELAY`` 0.25 s: the first request spends 0.1 s
    connecting; the second, on a warm connection, goes 0.25 s after the first was written,
    not 0.25 s after it was sent (0.15 s apart at the server)."""
    table = ip_table(0.25, 2, clock=clock, from_start=True)
    st = table.get("10.0.0.1")
    table.acquire(st)
    first = table.sent(st)
    assert first is not None
    assert table.wait(st, clock.now) == pytest.approx(0.25)  # a connection free, the pace not
    clock.now += 0.1
    first(clock.now)  # connected and written
    assert table.wait(st, clock.now) == pytest.approx(0.25)
    clock.now += 0.25
    assert table.available(st, clock.now)


def test_backoff_grows_per_failure_and_a_success_resets_it(clock):
    p = core(clock, delay=1.0, backoff=2.0, max_failures=5)
    st = p.table.get("10.0.0.1")
    p.fetch_ended(st.ip, release=False, failed=False)  # it answered: a failure now backs off
    for failures in (1, 2):
        p.fetch_ended(st.ip, release=False, failed=True)
        assert p.table.delay(st) == 1.0 + 2.0 * failures
    assert st.ready_at == pytest.approx(clock.now + 5.0)
    p.fetch_ended(st.ip, release=False, failed=False)
    assert p.table.delay(st) == 1.0
    p.fetch_ended(st.ip, release=False, failed=None)  # not the IP's fault: no change
    assert st.failures == 0


def test_ip_dropped_after_max_failures_logged_and_counted_once(clock, caplog):
    p = core(clock, delay=0.0, max_failures=3)
    st = p.table.get("10.0.0.9")
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.politeness.ipsites"):
        for _ in range(4):
            p.fetch_ended(st.ip, release=False, failed=True)
    assert st.dead and p.table.wait(st, clock.now) is None
    assert p.stats.values["larbin/ip/dropped"] == 1
    assert [r.getMessage() for r in caplog.records] == [
        "Dropping IP 10.0.0.9 after 3 consecutive failures (larbin noConnection)"
    ]
    with pytest.raises(DroppedRequest) as info:
        p.check_ip(st.ip)
    assert info.value.reason == NOCONNECTION
    assert p.table.gauges(clock.now) == (0, 0)  # a dropped IP is neither active nor cooling


def test_listeners_hear_changes_and_releases_in_that_order(clock):
    p = core(clock, delay=1.0)
    heard: list[tuple[str, ...]] = []
    p.table.add_listener(lambda st: heard.append(("changed", st.ip)))
    p.table.add_release_listener(
        lambda st, host, outcome: heard.append(("released", st.ip, host, outcome))
    )
    st = p.table.get("10.0.0.1")
    p.table.acquire(st)
    p.fetch_ended(st.ip, release=False, failed=False)
    p.lease_returned(st.ip, "a.test", ANSWERED)
    p.table.pause(st, 2.0)  # a throttling answer
    assert heard == [
        ("changed", "10.0.0.1"),
        ("changed", "10.0.0.1"),
        ("released", "10.0.0.1", "a.test", ANSWERED),
        ("changed", "10.0.0.1"),
    ]


# -- the host gate: DNS -> SSRF guard -> dead IP ------------------------------------------------


def gate(clock: ManualClock, answers: dict[str, str | None], allowed: str = "") -> Politeness:
    """A gate over a real DnsCache whose lookups answer from ``answers`` (None: no address)."""

    def lookup(host: str) -> defer.Deferred[str]:
        ip = answers.get(host)
        return defer.succeed(ip) if ip else defer.fail(DNSLookupError(host))

    dns = DnsCache(task.Clock(), ttl=60, timeout=5, clock=clock, lookup=lookup)
    guard = SsrfGuard(True, parse_networks(allowed))
    return Politeness(ip_table(1.0, clock=clock), CountingStats(), dns, guard)


def outcome(d: defer.Deferred[str]) -> str:
    """The IP, or ``dropped:<reason>``, of an already fired gate Deferred."""
    got: list[str] = []

    def dropped(failure) -> None:
        failure.trap(DroppedRequest)
        got.append("dropped:" + failure.value.reason)

    d.addCallbacks(got.append, dropped)
    return got[0]


def test_gate_resolves_once_and_counts_lookups(clock):
    p = gate(clock, {"a.test": "93.184.216.34"})
    assert outcome(p.resolve("a.test")) == "93.184.216.34"
    assert outcome(p.resolve("a.test")) == "93.184.216.34"
    assert p.stats.values["larbin/dns/lookups"] == 1
    assert p.cached_ip("a.test") == "93.184.216.34" and p.cached_ip("b.test") is None


def test_gate_drops_unresolvable_private_and_dead(clock):
    p = gate(clock, {"intranet.test": "10.0.0.1", "pub.test": "93.184.216.34"})
    assert outcome(p.resolve("nowhere.test")) == "dropped:" + DNS
    assert p.stats.values["larbin/dns/failures"] == 1
    assert outcome(p.resolve("intranet.test")) == "dropped:" + SSRF
    assert outcome(p.resolve("169.254.169.254")) == "dropped:" + SSRF  # a literal: no lookup
    assert p.stats.values["larbin/dns/lookups"] == 2
    st: IpState = p.table.get("93.184.216.34")
    st.dead = True
    assert outcome(p.resolve("pub.test")) == "dropped:" + NOCONNECTION


def test_allowed_networks_let_loopback_through(clock):
    p = gate(clock, {"h.test": "127.0.1.1"}, allowed="127.0.0.0/8")
    assert outcome(p.resolve("h.test")) == "127.0.1.1"
    assert outcome(gate(clock, {"h.test": "127.0.1.1"}).resolve("h.test")) == "dropped:" + SSRF


def test_local_gate_takes_the_host_as_the_ip(clock):
    p = core(clock)
    assert outcome(p.resolve("a.test")) == "a.test"
    assert p.cached_ip("a.test") == "a.test"


def test_host_drops_log_the_first_host_per_reason_and_count_all(clock, caplog):
    from twisted.python.failure import Failure

    p = core(clock)
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.politeness.ipsites"):
        for host in ("a.test", "b.test"):
            reason = p.host_dropped(host, Failure(DroppedRequest(DNS, f"{host}: no address")))
            p.count_drop(reason, 3)
        reason = p.host_dropped("c.test", Failure(DroppedRequest(SSRF, "10.0.0.1")))
    assert reason == SSRF
    assert p.stats.values["larbin/dropped/dns"] == 6
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2
    assert logged[0].startswith("Dropping the URLs of a.test: dns: a.test: no address")
    assert logged[1].startswith("Dropping the URLs of c.test: ssrf: 10.0.0.1")
