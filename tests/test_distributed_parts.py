"""The Redis scheduler's small state owners, without Redis: the shared view's freshness (what
the idle decision trusts), the shard clock and the held leases."""

from __future__ import annotations

from larbinscrapy.distributed.held import HeldLeases
from larbinscrapy.distributed.readiness import ShardClock
from larbinscrapy.distributed.view import SharedView


def test_a_status_read_before_our_last_change_is_not_fresh() -> None:
    view = SharedView(2)
    assert view.fresh() is None  # nothing read yet
    view.tick_sent(3)
    view.changed(5)  # an admit submitted after the tick's job
    view.read({"queued": 0, "leased": 0, "seeds": 0})
    assert view.fresh() is None
    assert view.queued == 0  # not taken either: our own admit may have queued records
    view.tick_sent(6)
    view.read({"queued": 7, "leased": 0, "seeds": 0})
    assert view.fresh() == {"queued": 7, "leased": 0, "seeds": 0}
    assert view.queued == 7


def test_the_queued_count_follows_pops_and_admits_between_reads() -> None:
    view = SharedView(2)
    view.joined(10)
    view.admitted(3)
    assert view.queued == 13
    view.popped(0, 4)
    view.popped(1, 5)
    assert view.queued == 9  # each shard as its last pop said
    assert view.summary() == {"queued": 9}


def test_a_wanted_status_is_asked_once() -> None:
    view = SharedView(1)
    view.want()
    assert view.take_want()
    assert not view.take_want()


def test_the_shard_clock() -> None:
    clock = ShardClock(3)
    clock.wait(0, 5.0)
    clock.wait(1, 2.0)
    clock.wait(2, 9.0)
    assert not clock.due(0, 4.0) and clock.due(1, 2.0)
    assert clock.quiet_until() == 2.0
    clock.sooner(2, 1.0)
    clock.sooner(0, 7.0)  # later than it was: unchanged
    assert clock.next == [5.0, 2.0, 1.0]
    clock.now(0)
    assert clock.next[0] == 0.0
    clock.all_now()
    assert clock.next == [0.0, 0.0, 0.0]


def test_held_leases_are_released_oldest_first() -> None:
    held = HeldLeases()
    held.hold("127.22.0.1", 0, "a")
    held.hold("127.22.0.1", 1, "b")
    assert held.take("127.22.0.2") is None
    assert held.take("127.22.0.1") == (0, "a")
    assert held.take("127.22.0.1") == (1, "b")
    assert held.take("127.22.0.1") is None
    assert held.by_ip == {}
