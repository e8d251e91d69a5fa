"""``ShardClock``: when each shard of the shared frontier may have a ready IP again.

A pop that leased nothing says how long the shard's first IP waits; the worker does not ask that
shard again before (``Pops``). A pop that found the shard empty (``nothing``) backs off:
``POLL``, then twice as long each time in a row, up to ``IDLE_POLL_MAX`` (an idle worker does
not ask 32 empty shards four times a second). Anything that may make an IP ready sooner moves
the time forward and ends the back-off: a release (the IP's own delay), a host resolved (its
sites can be leased), new records admitted or a dead worker's leases reaped (every shard at
once). The engine need not ask before the earliest of them (``quiet_until``).
"""

from __future__ import annotations

IDLE_POLL_MAX = 2.0  # seconds: the longest an idle worker waits before asking a shard again


class ShardClock:
    """Each shard's earliest time for a ready IP (module docstring)."""

    def __init__(self, count: int) -> None:
        self.next = [0.0] * count
        self.empty = [0] * count  # pops in a row that found the shard empty

    def due(self, shard: int, now: float) -> bool:
        return self.next[shard] <= now

    def wait(self, shard: int, until: float) -> None:
        """Nothing is ready on ``shard`` before ``until``."""
        self.next[shard] = until

    def nothing(self, shard: int, now: float, poll: float) -> float:
        """A pop found ``shard`` empty: ask again after ``poll`` s, doubled for
        each such pop in a row, at most ``IDLE_POLL_MAX``; that wait."""
        n = self.empty[shard]
        self.empty[shard] = n + 1
        wait = min(IDLE_POLL_MAX, poll * 2 ** min(n, 16))
        self.next[shard] = now + wait
        return wait

    def leased(self, shard: int) -> None:
        """A pop of ``shard`` leased records: no back-off."""
        self.empty[shard] = 0

    def sooner(self, shard: int, at: float) -> None:
        """An IP of ``shard`` may be ready at ``at``."""
        self.next[shard] = min(self.next[shard], at)
        self.empty[shard] = 0

    def now(self, shard: int) -> None:
        self.next[shard] = 0.0
        self.empty[shard] = 0

    def all_now(self) -> None:
        self.next = [0.0] * len(self.next)
        self.empty = [0] * len(self.empty)

    def idle(self, now: float) -> bool:
        """Every shard is backing off: each was empty when last asked."""
        return all(self.empty) and now < self.quiet_until()

    def quiet_until(self) -> float:
        """When the first shard may have a ready IP (the engine need not ask before)."""
        return min(self.next)
