"""What a worker's take of due pages costs on a real 3-master Redis Cluster, sharded by host.

    python benchmarks/bench_revisit_cluster.py [--shards 32] [--pages 20000] [--takes 400]

A ``RedisRevisitStore`` over ``--shards`` shards holding ``--pages`` pages of 2,000 hosts (due
in the future: the worker's every-0.25-s poll finds nothing, the common case), timed per take:

* pipelined: ``store.take`` (every shard's take script in one pipeline, as a worker runs it);
* the same with redis-py's own ``RedisCluster`` (which asks a node for each script call's keys,
  ``COMMAND GETKEYS``, before it sends the pipeline; ``connection.cluster_client`` does not);
* one call per shard: the same scripts sent one after the other (what a pipeline saves);
* one shard: the schedule of earlier versions (``{key}``, one slot) on the same cluster.

Then the share of the entries each master holds, and one take of every page once all are due
(pages handed out per second, each shard its share of ``LARBIN_REVISIT_INFLIGHT``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NOW = 1_800_000_000.0


def _fill(store, pages: int) -> None:
    from larbinscrapy.distributed.jobs import Call, run_calls
    from larbinscrapy.parse.urls import fingerprint_url
    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.redis_store import _ADD

    calls = []
    for i in range(pages):
        url = f"http://h{i % 2000:04d}.bench/page-{i:07d}.html"
        e = Entry(fingerprint_url(url), url, NOW + 3600 + i, 86400.0)
        calls.append(
            Call(("EVALSHA", _ADD.sha, 3, *store.keys(e), e.fp, e.pack(), e.due), script=_ADD)
        )
        if len(calls) == 1000:
            run_calls(store.server, calls)
            calls = []
    run_calls(store.server, calls)


def _per_take(fn, takes: int) -> str:
    """Wall and CPU (this process) ms per call of ``fn``."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(takes):
        fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return f"{wall / takes * 1000:.2f} ms ({cpu / takes * 1000:.2f} ms CPU)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--takes", type=int, default=400)
    args = parser.parse_args()
    from redis.cluster import RedisCluster

    from larbinscrapy.distributed.jobs import Call, run_calls
    from larbinscrapy.distributed.shards import HostShards
    from larbinscrapy.revisit.redis_store import _TAKE, RedisRevisitStore
    from tests.support.cluster import redis_cluster
    from tests.support.revisit import revisit_entries_per_master

    with (
        tempfile.TemporaryDirectory(prefix="bench-revisit-cluster-") as d,
        redis_cluster(Path(d)) as cluster,
    ):
        sharded = RedisRevisitStore(
            None,
            "bench:revisit",
            10_000_000,
            batch=10_000_000,
            connect=cluster.client,
            shards=HostShards(args.shards),
        )
        plain = RedisRevisitStore(
            None,
            "bench:revisit",
            10_000_000,
            batch=10_000_000,
            connect=lambda: RedisCluster.from_url(cluster.url),
            shards=HostShards(args.shards),
        )
        one = RedisRevisitStore(
            None, "one:revisit", 10_000_000, batch=10_000_000, connect=cluster.client
        )
        _fill(sharded, args.pages)
        _fill(one, args.pages)
        targs = (NOW, NOW - 3600, sharded.inflight, sharded.batch)

        def one_by_one() -> None:
            for keys in sharded.shard_keys:
                run_calls(
                    sharded.server, [Call(("EVALSHA", _TAKE.sha, 3, *keys, *targs), script=_TAKE)]
                )

        piped = _per_take(lambda: sharded.take(NOW, 3600), args.takes)
        redis_py = _per_take(lambda: plain.take(NOW, 3600), args.takes // 4)
        serial = _per_take(one_by_one, args.takes // 4)
        single = _per_take(lambda: one.take(NOW, 3600), args.takes)
        spread = revisit_entries_per_master(cluster, "bench:revisit")
        started = time.perf_counter()
        _, _, taken = sharded.take(NOW + 10 * 86400, 86400 * 30)
        all_due = time.perf_counter() - started
    print(f"{args.pages:,} pages, {args.shards} shards on 3 masters, idle poll (nothing due):")
    print(
        f"  pipelined take {piped}; with redis-py's own RedisCluster {redis_py};"
        f" one call per shard {serial}; one shard (the earlier layout) {single}"
    )
    total = sum(spread.values())
    print("  entries per master: " + ", ".join(f"{n / total:.0%}" for n in spread.values()))
    print(
        f"  all due: {len(taken):,} pages taken in one take, {all_due * 1000:.0f} ms"
        f" ({len(taken) / all_due:,.0f} pages/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
