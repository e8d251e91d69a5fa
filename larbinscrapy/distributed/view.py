"""``SharedView``: what this worker knows of the shared frontier's size, and how fresh it is.

The tick reads the frontier's status when ``spider_idle`` or the status page asked for one
(``want``); the idle decision trusts it only if it was read after the last job of ours that may
have queued or leased records (``changed``), so a status read before our own admit or pop never
closes the crawl. Between reads the queued count follows our own pops and admits.
"""

from __future__ import annotations


class SharedView:
    """The last status read, its freshness, and the queued count (module docstring)."""

    def __init__(self, shards: int) -> None:
        self.status: dict[str, int] | None = None  # the last status read by a tick
        self.first: dict[str, int] | None = None  # the status read as the worker joined
        self.wanted = False  # spider_idle or the status page asked the next tick for one
        self.tick_seq = 0  # the job of the tick in flight
        self.status_seq = 0  # the job that read ``status``
        self.changed_seq = 0  # the last job that may have queued or leased records
        self.queued = 0  # records queued in the whole frontier, as far as we know
        self.by_shard = [0] * shards  # each shard's queued records, as its last pop said

    def want(self) -> None:
        self.wanted = True

    def take_want(self) -> bool:
        """Whether a status was asked for (the tick about to be sent reads it)."""
        wanted, self.wanted = self.wanted, False
        return wanted

    def tick_sent(self, seq: int) -> None:
        self.tick_seq = seq

    def read(self, status: dict[str, int]) -> None:
        """The tick read ``status``; its queued count holds if nothing of ours changed it."""
        self.status, self.status_seq = status, self.tick_seq
        if self.status_seq > self.changed_seq:
            self.queued = status["queued"]

    def changed(self, seq: int) -> None:
        """The job ``seq`` may have queued or leased records."""
        self.changed_seq = max(self.changed_seq, seq)

    def fresh(self) -> dict[str, int] | None:
        """The last status, if it was read after our last change."""
        if self.status is None or self.status_seq <= self.changed_seq:
            return None
        return self.status

    def joined(self, queued: int, status: dict[str, int] | None = None) -> None:
        """The worker joined; ``status``, read then, is what the status page shows until a tick
        reads one (its first answer is not a view half empty)."""
        self.queued = queued
        self.first = status

    def admitted(self, new: int) -> None:
        self.queued += new

    def popped(self, shard: int, queued: int) -> None:
        self.by_shard[shard] = queued
        self.queued = sum(self.by_shard)

    def summary(self) -> dict[str, int]:
        """For the status page: the last status read (by a tick, else at join), or our queued
        count."""
        return dict(self.status or self.first or {"queued": self.queued})
