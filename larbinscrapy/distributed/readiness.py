"""``ShardClock``: when each shard of the shared frontier may have a ready IP again.

A pop that leased nothing says how long the shard's first IP waits; the worker does not ask that
shard again before (``Pops``). Anything that may make an IP ready sooner moves the time forward:
a release (the IP's own delay), a host resolved (its sites can be leased), new records admitted
or a dead worker's leases reaped (every shard at once). The engine need not ask before the
earliest of them (``quiet_until``).
"""

from __future__ import annotations


class ShardClock:
    """Each shard's earliest time for a ready IP (module docstring)."""

    def __init__(self, count: int) -> None:
        self.next = [0.0] * count

    def due(self, shard: int, now: float) -> bool:
        return self.next[shard] <= now

    def wait(self, shard: int, until: float) -> None:
        """Nothing is ready on ``shard`` before ``until``."""
        self.next[shard] = until

    def sooner(self, shard: int, at: float) -> None:
        """An IP of ``shard`` may be ready at ``at``."""
        self.next[shard] = min(self.next[shard], at)

    def now(self, shard: int) -> None:
        self.next[shard] = 0.0

    def all_now(self) -> None:
        self.next = [0.0] * len(self.next)

    def quiet_until(self) -> float:
        """When the first shard may have a ready IP (the engine need not ask before)."""
        return min(self.next)
