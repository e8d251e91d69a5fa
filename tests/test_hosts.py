"""The host level of politeness (``politeness.hosts``) on a fake clock: no crawl, no reactor.

Host and IP delays joined in ``IpTable.next_start``, the ring choosing a ready host among the
vhosts of an IP, Retry-After parsing, the doubling back-off and its reset, setting a host
aside, the bandwidth budget. The crawl tests (test_throttle.py) check the same at the server.
"""

from __future__ import annotations

import email.utils
import logging
import signal
from itertools import pairwise

import pytest

from larbinscrapy.frontier.sites import READY, ROTATION_EVERY, IpRing, Site
from larbinscrapy.politeness.hosts import Bandwidth, parse_retry_after
from larbinscrapy.politeness.ipsites import Politeness
from larbinscrapy.politeness.pauses import PauseFile, write_pauses
from tests.support.cores import CountingStats, ManualClock, host_table, ip_table


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


WALL = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (b"0", 0.0),
        ("  7 ", 7.0),
        (email.utils.formatdate(WALL + 90, usegmt=True), 90.0),  # HTTP-date, 90 s ahead
        (email.utils.formatdate(WALL - 90, usegmt=True), 0.0),  # a date in the past: now
        ("Sun, 06 Nov 1994 08:49:37", None),  # no zone: not an HTTP-date
        ("-5", None),
        ("1.5", None),  # delta-seconds are whole
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_values(value, seconds):
    assert parse_retry_after(value, WALL) == seconds


def test_host_and_ip_delays_both_hold_from_the_end_of_the_fetch(clock):
    table = ip_table(0.25, clock=clock, host_delay=1.0)
    st = table.get("10.0.0.1")
    a, b = table.hosts.get("a.test"), table.hosts.get("b.test")
    table.hosts.finish(a, release=False)
    table.finish(st, release=False, failed=False)
    assert table.next_start(st, "a.test") == pytest.approx(101.0)  # the host's 1 s
    assert table.next_start(st, "b.test") == pytest.approx(100.25)  # the IP's 0.25 s
    assert table.next_start(st) == pytest.approx(100.25)
    assert b.ready_at == 0.0


def _site(key: str, ip: str, n: int) -> Site:
    site = Site(key, key, state=READY, ip=ip)
    site.queue.extend((0, i, f"{key}/{i}".encode()) for i in range(n))
    return site


def test_ring_serves_vhosts_of_one_ip_at_the_ip_delay(clock):
    # 4 hostnames on one IP, host delay 1 s, IP delay 0.25 s: one fetch every 0.25 s, each host
    # once a second (IP alone would allow 1/s in all).
    table = ip_table(0.25, clock=clock, host_delay=1.0)
    ring = IpRing(table)
    for name in "abcd":
        ring.add_site(_site(name, "10.0.0.1", 10))
    starts: dict[str, list[float]] = {}
    while clock.now < 104.0:
        picked = ring.next_ready(clock.now)
        if picked is None:
            clock.now = round(ring.next_wakeup() or clock.now + 0.01, 6)
            continue
        st, site = picked
        starts.setdefault(site.host, []).append(clock.now)
        table.acquire(st)
        table.hosts.finish(table.hosts.get(site.host), release=False)
        table.finish(st, release=True, failed=False)
        ring.place(st.ip)
    assert sum(map(len, starts.values())) == 16
    for times in starts.values():
        assert min(b - a for a, b in pairwise(times)) >= 1.0 - 1e-9


def test_throttle_with_retry_after_pauses_host_and_ip_and_counts(clock, caplog):
    p = Politeness.local(ip_table(0.25, clock=clock, host_delay=1.0), CountingStats())
    st = p.table.get("10.0.0.1")
    with caplog.at_level(logging.INFO, logger="larbinscrapy.politeness.ipsites"):
        assert p.throttled("10.0.0.1", "a.test", 429, 30.0) == 30.0
        assert p.throttled("10.0.0.1", "a.test", 503, 10.0) == 10.0  # the longer pause holds
    assert p.table.next_start(st, "a.test") == pytest.approx(130.0)
    assert p.table.next_start(st, "b.test") == pytest.approx(130.0)  # the IP is paused too
    assert p.stats.values["larbin/throttled/429"] == 1
    assert p.stats.values["larbin/throttled/503"] == 1
    assert [r.getMessage()[:21] for r in caplog.records] == ["a.test answered 429: "]  # once
    gauges = p.table.hosts.gauges(clock.now)
    assert gauges["throttled"] == 1 and gauges["seen"] == 1


def test_backoff_without_retry_after_doubles_to_the_cap_and_a_normal_answer_resets_it(clock):
    hosts = host_table(1.0, clock=clock, throttle_backoff=60.0, max_backoff=400.0, rng=lambda: 1.0)
    hs = hosts.get("a.test")
    pauses = [hosts.throttle(hs, None) for _ in range(5)]
    assert pauses == pytest.approx([66.0, 132.0, 264.0, 440.0, 440.0])  # +10% jitter at most
    hosts.answered(hs)
    assert hosts.throttle(hs, None) == pytest.approx(66.0)
    low = host_table(1.0, clock=clock, rng=lambda: 0.0)  # no jitter: the back-off itself
    assert low.throttle(low.get("b.test"), None) == 60.0


def test_retry_after_past_the_cap_sets_the_host_aside(clock):
    p = Politeness.local(ip_table(0.25, clock=clock, max_retry_after=3600.0), CountingStats())
    assert p.throttled("10.0.0.1", "a.test", 429, 7200.0) is None
    assert p.table.hosts.get("a.test").set_aside
    assert p.table.get("10.0.0.1").ready_at == 0.0  # the IP's other hosts go on
    assert p.stats.values["larbin/host/set_aside"] == 1


def test_bandwidth_budget_holds_the_rate_and_concurrent_starts_queue(clock):
    bw = Bandwidth(10_000.0, clock)
    assert bw.wait(clock.now) == 0.0
    reserved = bw.start()  # the first fetch: its size unknown, nothing else starts meanwhile
    assert bw.wait(clock.now) is None
    clock.now += 0.1
    bw.received(50_000, reserved)  # 50 kB at 10 kB/s: 5 s of budget used
    assert bw.wait(clock.now) == pytest.approx(5.0)
    clock.now += 5.0
    r1, r2 = bw.start(), bw.start()  # two sites ready at once: the largest body reserved each
    assert r1 == r2 == 50_000
    assert bw.wait(clock.now) == pytest.approx(10.0)
    bw.received(1_000, r1)  # a small body gives back what it did not use
    assert bw.wait(clock.now) == pytest.approx(5.1)
    off = Bandwidth(0.0, clock)
    off.start()
    assert off.wait(clock.now) == 0.0


def test_fetches_the_bandwidth_budget_holds_go_in_the_order_they_came(clock):
    """Sites waiting for the budget go first come, first served: none waits while later ones
    take every opening (a crawl saw one site wait 11 s while four others took 25 openings)."""
    bw = Bandwidth(10_000.0, clock)
    bw.received(10_000, bw.start())  # 1 s of budget a fetch; used until t = 1
    first, second = bw.take(), bw.take()
    assert bw.wait(clock.now, second) > bw.wait(clock.now, first) == pytest.approx(1.0)
    clock.now += 1.0
    assert bw.wait(clock.now, first) == 0.0
    assert bw.wait(clock.now, second) > 0.0  # the opening is the first's
    assert bw.wait(clock.now) > 0.0  # and a newcomer waits behind both
    bw.start(first)
    clock.now += 1.0
    assert bw.wait(clock.now, second) == 0.0
    third = bw.take()
    bw.give_up(second)  # the second now waits for its host: the third's turn
    assert bw.wait(clock.now, third) == 0.0
    bw.start(third)
    clock.now += 1.0
    assert bw.wait(clock.now) == 0.0  # nobody in line: the budget is open to anyone


def test_pause_file_keeps_running_pauses_and_survives_a_bad_file(tmp_path, caplog):
    path = tmp_path / "politeness" / "pauses.json"
    write_pauses(path, {"a.test": (WALL + 30, "10.0.0.1"), "old.test": (WALL - 1, "10.0.0.2")})
    assert not path.with_suffix(".tmp").exists()  # written aside, then renamed over
    assert PauseFile(path).load(WALL) == {"a.test": (WALL + 30, "10.0.0.1")}  # ended: left out
    path.write_text('{"a.test": 5}')
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.politeness.pauses"):
        assert PauseFile(path).load(WALL) == {}
    assert "Ignoring unreadable" in caplog.text
    assert PauseFile.in_jobdir(None).load(WALL) == {}
    assert PauseFile.in_jobdir(str(tmp_path)).path == path


def test_a_host_that_only_throttles_is_set_aside_after_so_many_in_a_row(clock):
    p = Politeness.local(ip_table(0.25, clock=clock, max_in_a_row=3), CountingStats())
    hs = p.table.hosts.get("a.test")
    assert p.throttled("10.0.0.1", "a.test", 429, 1.0) == 1.0
    assert p.throttled("10.0.0.1", "a.test", 429, 1.0) == 1.0
    p.table.hosts.answered(hs)  # a normal answer between: the count starts again
    assert p.throttled("10.0.0.1", "a.test", 429, 1.0) == 1.0
    assert p.throttled("10.0.0.1", "a.test", 503, 1.0) == 1.0
    assert not hs.set_aside
    assert p.throttled("10.0.0.1", "a.test", 429, 1.0) is None  # the third in a row
    assert hs.set_aside
    assert p.stats.values["larbin/host/set_aside"] == 1


def test_an_ip_ready_by_the_clock_but_not_at_the_callers_now_does_not_spin(clock):
    # next_ready(now) takes `now` from its caller while the clock moves on: an IP that is not
    # available at `now` but is by the clock was put back as ready and popped again, forever
    # (a crawl's reactor spun at 100% CPU, seen in CI: no log line, no stats file for 120 s).
    table = ip_table(0.2, clock=clock)
    ring = IpRing(table)
    ring.add_site(_site("a", "10.0.0.1", 3))
    picked = ring.next_ready(clock.now)
    assert picked is not None
    st, _ = picked
    table.acquire(st)
    table.finish(st, release=True, failed=False)  # next start: now + 0.2
    clock.now += 0.3  # by the clock it is ready again...
    ring.place(st.ip)

    def spinning(signum: int, frame: object) -> None:
        raise TimeoutError("next_ready did not return")

    previous = signal.signal(signal.SIGALRM, spinning)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        assert ring.next_ready(clock.now - 0.2) is None  # ...but not at the caller's `now`
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert ring.next_ready(clock.now) is not None  # and at its time it is handed out


def test_a_host_never_heard_from_gets_the_silent_timeout_and_is_set_aside_after_it(clock):
    hosts = host_table(0.0, clock=clock, silent_timeout=10.0)
    quiet, talker, throttler = hosts.get("q.test"), hosts.get("t.test"), hosts.get("r.test")
    assert hosts.first_answer_timeout(quiet) == 10.0
    hosts.answered(talker)  # any answer, a 404 or a 301 as well
    assert hosts.first_answer_timeout(talker) is None
    assert not hosts.timed_out(talker) and not talker.set_aside  # a slow page of a live host
    hosts.throttle(throttler, 5.0)  # a 429 is an answer too
    assert hosts.first_answer_timeout(throttler) is None
    assert hosts.timed_out(quiet) and quiet.set_aside and quiet.silent
    assert not hosts.timed_out(quiet)  # set aside once
    off = host_table(0.0, clock=clock)  # 0: off, DOWNLOAD_TIMEOUT for every fetch
    assert off.first_answer_timeout(off.get("q.test")) is None
    assert not off.timed_out(off.get("q.test"))


def test_sites_not_started_yet_start_while_started_ones_could_take_every_fetch(clock):
    # 5 IPs, a site each of 6 URLs, host and IP delays 0.1 s, and the crawl can start one fetch
    # every 0.4 s (a bandwidth cap, or every slot taken). A started site goes ahead of the
    # rotation while its connection is warm, but it must not keep the others from starting
    # (CI: test_throttle's fifth site got its first page 9.5 s into a 14 s crawl).
    table = ip_table(0.1, clock=clock, host_delay=0.1)
    ring = IpRing(table, grace=0.1)
    for i, name in enumerate("abcde"):
        ring.add_site(_site(name, f"10.0.0.{i + 1}", 6))
    order: list[tuple[str, float]] = []
    while len(order) < 30:
        picked = ring.next_ready(clock.now)
        if picked is None:
            clock.now = round(ring.next_wakeup() or clock.now + 0.01, 6)
            continue
        st, site = picked  # handed out as the scheduler does it, and fetched at once
        site.due = -1.0
        site.queue.pop(0)
        if not site.queue:
            ring.site_emptied(site)
        ring.serving[site.host] = site
        table.acquire(st)
        order.append((site.host, clock.now - 100.0))
        table.hosts.finish(table.hosts.get(site.host), release=False)
        table.finish(st, release=True, failed=False)
        ring.released(st, site.host)
        ring.place(st.ip)
        clock.now += 0.4
    assert sorted(host for host, _ in order) == sorted("abcde" * 6)
    first = {host: min(t for h, t in order if h == host) for host in "abcde"}
    # one site started a second at least (ROTATION_EVERY): before, e waited for a..d (9.6 s)
    assert max(first.values()) <= 4 * (ROTATION_EVERY + 0.4), order
