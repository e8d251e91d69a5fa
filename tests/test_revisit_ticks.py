"""Workers sharing one revisit schedule (Redis) share its due pages, whatever their start times.

Every worker looks for due pages on its own timer; a take hands out everything due so far. With a
fixed tick, two workers started a few milliseconds apart stay locked in that phase for the whole
crawl, and due times fall on the schedule's bucket grid: the worker that ticks first then takes
every due page and the other none (seen in a full run: one worker of two revisited nothing,
``tests/test_distributed_parity.py::test_two_workers_revisit_on_a_cluster``). The ticks here run
on a ``task.Clock``: the shared schedule is a list of due times both extensions take from.
"""

from __future__ import annotations

from typing import Any

from scrapy import Spider
from scrapy.utils.test import get_crawler
from twisted.internet import defer, task

from larbinscrapy.revisit.extension import RevisitExtension
from larbinscrapy.revisit.rule import RevisitRule

GRID = 0.05  # LARBIN_REVISIT_BUCKET as the tests use it: due times fall on this grid
TICK = 0.25  # the shared schedule's tick interval


class _SharedDue:
    """Due times on the bucket grid, taken by whichever worker asks first once they are due."""

    def __init__(self, clock: task.Clock) -> None:
        self.clock = clock
        self.next_due = GRID
        self.taken: dict[str, int] = {}

    def take(self, worker: str) -> int:
        n = 0
        while self.next_due <= self.clock.seconds() + 1e-9:
            self.next_due = round(self.next_due + GRID, 6)
            n += 1
        self.taken[worker] = self.taken.get(worker, 0) + n
        return n


class _WorkerSchedule:
    """One worker's view of the shared schedule (the ``SharedSchedule`` surface the ticks use)."""

    tick_interval = TICK

    def __init__(self, shared: _SharedDue, name: str) -> None:
        self.shared, self.name = shared, name

    def open(self) -> list[Any]:
        return []

    def pending(self) -> bool:
        return True

    def __len__(self) -> int:
        return 0

    def take(self, now: float) -> defer.Deferred[list[Any]]:
        self.shared.take(self.name)
        return defer.succeed([])

    def checkpoint(self) -> None:
        pass

    def close(self) -> None:
        pass


def _worker(clock: task.Clock, shared: _SharedDue, name: str) -> RevisitExtension:
    crawler = get_crawler(Spider)
    ext = RevisitExtension(
        crawler,
        RevisitRule(initial=1.0, minimum=0.25, maximum=8.0, streak=2, factor=2.0),
        near_distance=3,
        checkpoint_interval=30.0,
        gone_interval=0.0,
        clock=clock.seconds,
        timer=clock,
    )
    ext.schedule = _WorkerSchedule(shared, name)  # type: ignore[assignment]
    return ext


def test_two_workers_started_5_ms_apart_both_take_due_pages() -> None:
    clock = task.Clock()
    shared = _SharedDue(clock)
    first, second = _worker(clock, shared, "first"), _worker(clock, shared, "second")
    first.spider_opened()
    clock.advance(0.005)
    second.spider_opened()
    for _ in range(60_000):  # 60 s in 1 ms steps
        clock.advance(0.001)
    first.spider_closed()
    second.spider_closed()
    total = sum(shared.taken.values())
    assert total > 1000
    shares = {name: n / total for name, n in shared.taken.items()}
    assert min(shares.values()) >= 0.3, shares  # each about half: neither starved
