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
