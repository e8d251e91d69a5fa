"""Per-host and per-IP politeness state bounded (#35, point 3): past the cap the oldest idle
states leave memory and come back intact; a state something holds or uses stays."""

from __future__ import annotations

import gc

from tests.support.cores import host_table, ip_table


class Clock:
    """A clock a test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_evicted_hosts_come_back_with_their_clock_pause_and_back_off() -> None:
    clock = Clock()
    table = host_table(2.0, clock=clock, resident_max=4)
    cooling = table.get("cooling.test")
    table.start(cooling)
    table.finish(cooling, release=True)  # its delay runs to 102
    paused = table.get("paused.test")
    table.throttle(paused, None)  # back-off doubled from its base, paused
    backoff, until = paused.backoff, paused.paused_until
    slow = table.get("slow.test")
    table.set_crawl_delay(slow, 7.0)
    del cooling, paused, slow
    for n in range(20):
        table.get(f"h{n}.test")
    assert len(table.hosts) <= 4
    assert "cooling.test" not in table.hosts and "paused.test" not in table.hosts
    assert table.next_start("cooling.test") == 102.0  # asked without bringing it back
    back = table.get("cooling.test")
    assert back.ready_at == 102.0 and back.busy == 0
    again = table.get("paused.test")
    assert (again.backoff, again.paused_until, again.throttled, again.in_a_row) == (
        backoff,
        until,
        1,
        1,
    )
    assert table.delay(table.get("slow.test")) == 7.0


def test_a_new_hosts_state_is_forgotten_not_packed() -> None:
    clock = Clock()
    table = host_table(1.0, clock=clock, resident_max=10)
    for n in range(1000):
        hs = table.get(f"h{n}.test")
        table.start(hs)
        table.finish(hs, release=True)
        clock.now += 0.5  # a host's delay (1 s) is over when it is evicted (3 hosts later)
    del hs
    assert len(table.hosts) <= 10
    assert not table.packed
    assert table.gauges(clock.now)["seen"] == 1000


def test_a_host_that_is_fetching_or_held_is_never_evicted() -> None:
    clock = Clock()
    table = host_table(1.0, clock=clock, resident_max=2)
    busy = table.get("busy.test")
    table.start(busy)
    held = table.get("held.test")  # a caller waiting for the IP keeps it across the wait
    for n in range(10):
        table.get(f"h{n}.test")
    assert table.hosts["busy.test"] is busy and table.hosts["held.test"] is held


def test_hosts_set_aside_leave_memory_and_come_back_set_aside() -> None:
    """A broad crawl sets aside one host in a hundred (never answered, or asked for too long a
    pause): in the million-host run they filled the whole cap, nothing could be evicted, and
    every new host scanned all the resident ones (half the crawl's CPU, and growing). A host
    set aside is packed like any other and comes back set aside, for the same reason."""
    clock = Clock()
    table = host_table(1.0, clock=clock, resident_max=100, silent_timeout=10.0)
    for n in range(300):  # three caps of silent hosts, then one of throttled ones
        hs = table.get(f"silent{n}.test")
        assert table.timed_out(hs)
    for n in range(100):
        hs = table.get(f"pause{n}.test")
        hs.set_aside = True  # (what a pause past LARBIN_THROTTLE_RETRY_AFTER_MAX leaves)
    del hs
    assert len(table.hosts) <= 100
    silent, pause = table.get("silent0.test"), table.get("pause0.test")
    assert silent.set_aside and silent.silent
    assert pause.set_aside and not pause.silent


def test_a_cap_full_of_held_hosts_does_not_scan_them_for_every_new_host() -> None:
    """Hosts something holds (a fetch open, a caller waiting) are never evicted; when they
    fill the cap, a new host must not walk all of them again each time."""
    table = host_table(1.0, clock=Clock(), resident_max=100)
    held = [table.get(f"held{n}.test") for n in range(150)]
    scans = 0
    evict = table._evict

    def counted() -> None:
        nonlocal scans
        scans += 1
        evict()

    table._evict = counted  # type: ignore[method-assign]
    for n in range(1000):
        table.get(f"h{n}.test")
    assert scans <= 1000 // 25, f"{scans} scans of the resident hosts for 1,000 new hosts"
    assert all(table.hosts[hs.host] is hs for hs in held)


def test_evicted_ips_come_back_backing_off_and_dropped_ones_stay() -> None:
    clock = Clock()
    table = ip_table(0.5, clock=clock, resident_max=3)
    dead = table.get("127.25.0.1")
    for _ in range(table.max_failures):
        table.finish(dead, release=False, failed=True)
    assert dead.dead
    flaky = table.get("127.25.0.2")
    table.finish(flaky, release=False, failed=False)
    table.finish(flaky, release=False, failed="timeout")
    window = list(flaky.recent)
    strikes, answered = flaky.strikes, flaky.answered
    waiting = table.get("127.25.0.3")
    waiting.waiters.append(object())  # type: ignore[arg-type]  # the send-time gate's
    del dead, flaky
    for n in range(4, 30):
        table.get(f"127.25.0.{n}")
    assert "127.25.0.2" not in table.ips
    assert table.ips["127.25.0.3"] is waiting
    assert table.ips["127.25.0.1"].dead  # stays: the robots middleware reads ``ips``
    back = table.get("127.25.0.2")
    assert (list(back.recent), back.recent_failed, back.strikes, back.answered) == (
        window,
        1,
        strikes,
        answered,
    )


def test_packed_state_is_not_tracked_by_the_cyclic_collector() -> None:
    clock = Clock()
    table = host_table(1.0, clock=clock, resident_max=2)
    for n in range(10):
        hs = table.get(f"h{n}.test")
        table.set_crawl_delay(hs, 3.0)
    del hs
    gc.collect()
    assert len(table.packed) >= 8
    assert not any(gc.is_tracked(v) for v in table.packed.values())
    ips = ip_table(0.5, clock=clock, resident_max=2)
    for n in range(10):
        ips.finish(ips.get(f"127.25.1.{n}"), release=False, failed=False)
    gc.collect()
    assert len(ips.packed) >= 8
    assert not any(gc.is_tracked(v) for v in ips.packed.values())
