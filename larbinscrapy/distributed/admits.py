"""``Admits``: the requests and acknowledgements a worker buffers for the shared frontier.

``enqueue_request`` buffers each new request by shard (its tier, seen-bit positions and entry);
the buffer goes to Redis as one ``admit`` per shard (test-and-set of the bits, queueing of the
new ones, then the acknowledgements of the pages that produced them, ``ShardedFrontier.admit``)
when a page is done, on a redirect/retry, at the next ``next_request`` or past
``FLUSH_RECORDS``. One admit is in flight at a time: what is buffered meanwhile goes with the
next one (sent when it ends), so a busy worker admits many pages' links per script. A failed
admit (Redis away) is buffered again: an admit is idempotent.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.statscollectors import StatsCollector

    from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.distributed.readiness import ShardClock
    from larbinscrapy.distributed.sharded import Entry
    from larbinscrapy.distributed.view import SharedView

FLUSH_RECORDS = 500  # buffered requests that force an admit before the page is done


class Admits:
    """The buffered requests, acknowledgements and taken seeds, and their admits."""

    def __init__(
        self,
        link: FrontierLink,
        *,
        view: SharedView,
        clock: ShardClock,
        df: RedisBitmapDupeFilter,
        stats: StatsCollector,
        wake: Callable[[], None],
    ) -> None:
        self.link = link
        self.view = view
        self.clock = clock
        self.df = df
        self.stats = stats
        self.wake = wake
        self.buffers: list[list[Entry]] = [[] for _ in range(link.shards.count)]
        self.buffered = 0
        self.acks: list[str] = []
        self.seeds_pending = False  # seeds taken from Redis: the next admit acknowledges them
        self.admitting = 0  # admits in flight
        self.closing = False

    def add(self, shard: int, entry: Entry) -> None:
        self.buffers[shard].append(entry)
        self.buffered += 1

    def ack(self, rid: str) -> None:
        """Acknowledge the record ``rid`` with the next admit, sent now."""
        self.acks.append(rid)
        self.flush()

    def seeds_taken(self) -> None:
        self.seeds_pending = True

    def full(self) -> bool:
        return self.buffered >= FLUSH_RECORDS

    def flush(self, now: bool = False) -> None:
        """Admit the buffered requests and send the pending acknowledgements: one script per
        shard, one admit in flight unless ``now`` or the buffer is full (module docstring)."""
        if not (self.buffered or self.acks or self.seeds_pending):
            return
        if self.admitting and not now and self.buffered < FLUSH_RECORDS:
            return
        buffers, acks, seeds = self.buffers, self.acks, self.seeds_pending
        self.buffers = [[] for _ in buffers]
        self.acks, self.seeds_pending, self.buffered = [], False, 0
        self.admitting += 1
        fs, worker, jobs = self.link.fs, self.link.worker, self.link.jobs
        if fs.cluster:
            job: Any = (fs.admit, worker, buffers, acks, seeds)
        else:  # one call: batched with the other calls of this round trip
            job = (fs.admit_calls(worker, buffers, acks, seeds)[0][0],)
        jobs.submit(
            "admit",
            *job,
            then=self._admitted,
            always=self._ended,
            failed=partial(self._failed, buffers, acks, seeds),
        )
        self.view.changed(jobs.seq)

    def _failed(self, buffers: list[list[Entry]], acks: list[str], seeds: bool) -> None:
        """Redis away: admit them again with the next flush (an admit is idempotent: what it
        queued before its answer was lost is filtered by its own bits, acks are deleted once)."""
        for mine, failed in zip(self.buffers, buffers, strict=True):
            mine[:0] = failed
        self.buffered += sum(len(b) for b in buffers)
        self.acks[:0] = acks
        self.seeds_pending = self.seeds_pending or seeds

    def _ended(self) -> None:
        self.admitting -= 1
        if not self.closing:
            self.flush()

    def _admitted(self, result: tuple[int, int]) -> None:
        new, filtered = result
        if new:
            self.stats.inc_value("larbin/frontier/enqueued", new)
            self.view.admitted(new)
            self.clock.all_now()
            self.wake()
        self.df.count_filtered(filtered)

    def close(self) -> None:
        """The scheduler closes: an admit that ends sends no other (``close`` sends the last)."""
        self.closing = True
