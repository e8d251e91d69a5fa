"""``ShardedFrontier``: one ``RedisFrontier`` per shard, and the steps that span shards.

With one Redis there is one shard, its keys are those of earlier versions, and every step is
one script as before (an admit carries its page's acknowledgement and the seed list's). In a
Redis Cluster (``LARBIN_REDIS_CLUSTER``) a host's URLs, site lists, DNS answer and seen bits live
in its shard (``Shards``); a step that spans shards runs in the worker's Redis thread as:

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larbinscrapy.distributed.frontier import (
    RedisFrontier,
    seeds_reap_call,
    take_seeds_call,
)
from larbinscrapy.distributed.jobs import Call, run_calls

if TYPE_CHECKING:
    from collections.abc import Sequence

    from larbinscrapy.distributed.shards import Shards

Entry = tuple[int, list[int], bytes]  # tier, bit positions, tier entry


def _raise_first(results: list[Any]) -> list[Any]:
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


class ShardedFrontier:
    """The shared frontier over ``shards.count`` shards (module docstring)."""

    def __init__(self, server: Any, shards: Shards, *, seeds_key: str, **frontier: Any) -> None:
        self.server = server
        self.shards = shards
        self.cluster = shards.count > 1
        self.frontiers = [
            RedisFrontier(server, shards.prefix(i), **frontier) for i in range(shards.count)
        ]
        self.seeds_key = seeds_key
        # one Redis: the seeds a worker took wait in its frontier's keys, as before; a cluster:
        # in the seed list's slot
        self.seed_prefix = shards.seed_prefix(seeds_key) if self.cluster else shards.prefix(0)

    # -- lease ids ------------------------------------------------------------------------
    def rid(self, shard: int, lease: str) -> str:
        return f"{shard}/{lease}" if self.cluster else lease

    def shard_of_rid(self, rid: str) -> tuple[int, str]:
        if not self.cluster:
            return 0, rid
        shard, _, lease = rid.partition("/")
        return int(shard), lease

    # -- admit (Redis thread) ---------------------------------------------------------------
    def admit_calls(
        self, worker: str, buffers: Sequence[list[Entry]], acks: list[str], seeds: bool
    ) -> list[list[Call]]:
        """The admit as steps of calls: one step with one shard, two in a cluster."""
        shards = self.shards
        if not self.cluster:
            return [
                [
                    self.frontiers[0].admit_call(
                        worker, shards.seen_key(0), shards.shard_bits, buffers[0], acks, seeds
                    )
                ]
            ]
        first = [
            self.frontiers[k].admit_call(worker, shards.seen_key(k), shards.shard_bits, b)
            for k, b in enumerate(buffers)
            if b
        ]
        by_shard: dict[int, list[str]] = {}
        for rid in acks:
            k, lease = self.shard_of_rid(rid)
            by_shard.setdefault(k, []).append(lease)
        then = [
            self.frontiers[k].admit_call(worker, shards.seen_key(k), 0, [], leases)
            for k, leases in by_shard.items()
        ]
        if seeds:
            then.append(Call(("DEL", f"{self.seed_prefix}:seeds:{worker}"), lambda _: (0, 0)))
        return [first, then]

    def admit(
        self, worker: str, buffers: Sequence[list[Entry]], acks: list[str], seeds: bool
    ) -> tuple[int, int]:
        """Run the admit's steps in order, each only if the one before succeeded."""
        new = filtered = 0
        for step in self.admit_calls(worker, buffers, acks, seeds):
            if step:
                for n, f in _raise_first(run_calls(self.server, step)):
                    new, filtered = new + n, filtered + f
        return new, filtered

    # -- membership (Redis thread) ----------------------------------------------------------
    def heartbeat(self, worker: str, timeout: float) -> tuple[int, int]:
        """Every shard reaps workers silent for ``timeout``: (requeued, workers reaped)."""
        return self.heartbeat_with(worker, timeout, None)[0]

    def heartbeat_with(
        self, worker: str, timeout: float, also: Call | None
    ) -> tuple[tuple[int, int], Any]:
        """``heartbeat``, and the reply of ``also`` sent in the same round trip."""
        start = "" if self.cluster else self.seeds_key
        calls = [f.heartbeat_call(worker, timeout, start) for f in self.frontiers]
        if self.cluster:
            calls.append(seeds_reap_call(self.seed_prefix, worker, timeout, self.seeds_key))
        if also is not None:
            calls.append(also)
        results = _raise_first(run_calls(self.server, calls))
        reaps = results[: len(self.frontiers)]
        extra = results[-1] if also is not None else None
        return (sum(r for r, _ in reaps), max(g for _, g in reaps)), extra

    def retire(self, worker: str) -> int:
        start = "" if self.cluster else self.seeds_key
        calls = [f.retire_call(worker, start) for f in self.frontiers]
        if self.cluster:
            calls.append(seeds_reap_call(self.seed_prefix, worker, -1, self.seeds_key))
        return sum(_raise_first(run_calls(self.server, calls))[: len(self.frontiers)])

    def take_seeds(self, worker: str, n: int) -> list[bytes]:
        return list(
            _raise_first(
                run_calls(
                    self.server, [take_seeds_call(self.seed_prefix, worker, self.seeds_key, n)]
                )
            )[0]
        )

    def unresolved(self, shard: int) -> list[str]:
        return list(
            _raise_first(run_calls(self.server, [self.frontiers[shard].unresolved_call()]))[0]
        )

    def status(self) -> dict[str, int]:
        """Queued and leased records of all shards, seeds not yet read, live workers."""
        calls = [f.counts_call() for f in self.frontiers]
        calls += [Call(("LLEN", self.seeds_key), int), self.frontiers[0].workers_call()]
        results = _raise_first(run_calls(self.server, calls))
        counts, (seeds, workers) = results[:-2], results[-2:]
        return {
            "queued": sum(q for q, _ in counts),
            "leased": sum(n for _, n in counts),
            "seeds": seeds,
            "workers": workers,
        }

    def bits_set(self, m: int) -> int:
        """Seen bits set in every shard's filter (``BITCOUNT``)."""
        shards = self.shards
        keys = []
        for k in range(shards.count):
            key = shards.seen_key(k)
            if shards.shard_bits:
                keys += [f"{key}:{i}" for i in range(-(-shards.bits // 2**shards.shard_bits))]
            else:
                keys.append(key)
        return sum(_raise_first(run_calls(self.server, [Call(("BITCOUNT", k), int) for k in keys])))

    def delete(self) -> None:
        """Remove every key of the crawl (a finished crawl with SCHEDULER_PERSIST off)."""
        for f in self.frontiers:
            f.delete()
        for k in range(self.shards.count):
            for key in self.server.scan_iter(match=f"{self.shards.seen_key(k)}*"):
                self.server.delete(key)
