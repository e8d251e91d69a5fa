"""A worker's batch of script calls on a Redis Cluster: redis-py's cluster pipeline against
``lean/rediscluster.pipelined`` (one plain pipeline a master).

    python benchmarks/bench_cluster_pipeline.py [--calls 8000]

Starts a 3-master cluster on loopback (``tests/support/cluster.py``), then sends ``--calls``
``EVALSHA`` calls (one ``INCR`` each, over 32 hash tags: every master gets some) in batches of
4, 20 and 40 calls, each way, and prints the client's CPU (``time.thread_time``: Python and
its system calls, not Redis's) a batch and a call. Both ways give the same replies (checked).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from larbinscrapy.lean.rediscluster import cluster_client, pipelined
from tests.support.cluster import redis_cluster

KEYS = [f"{{s{i}}}:n" for i in range(32)]


def redis_py(client: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    pipe = client.pipeline(transaction=False)
    for args in commands:
        pipe.execute_command(*args)
    return list(pipe.execute(raise_on_error=False))


def measure(client: Any, sha: str, calls: int, per: int, send: Any) -> tuple[float, list[Any]]:
    """CPU seconds of ``calls`` script calls sent ``per`` a batch; the last batch's replies."""
    replies: list[Any] = []
    start = time.thread_time()
    for n in range(calls // per):
        batch = [("EVALSHA", sha, 1, KEYS[(n * per + j) % len(KEYS)]) for j in range(per)]
        replies = send(client, batch)
    return time.thread_time() - start, replies


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=8000)
    args = p.parse_args(argv)
    print(
        "| calls a batch | redis-py's cluster pipeline: us a batch, a call | pipelined: us a "
        "batch, a call | ratio |"
    )
    print("|---:|---|---|---:|")
    with tempfile.TemporaryDirectory() as tmp, redis_cluster(Path(tmp) / "cluster") as cluster:
        client = cluster_client(cluster.url)
        sha = client.script_load("return redis.call('INCR', KEYS[1])")
        for per in (4, 20, 40):
            batches = args.calls // per
            theirs, r1 = measure(client, sha, args.calls, per, redis_py)
            ours, r2 = measure(client, sha, args.calls, per, pipelined)
            if len({b - a for a, b in zip(r1, r2, strict=True)}) != 1:  # each key as often
                raise SystemExit(f"replies differ: {r1[:4]} then {r2[:4]}")
            print(
                f"| {per} | {1e6 * theirs / batches:.0f}, {1e6 * theirs / args.calls:.1f} | "
                f"{1e6 * ours / batches:.0f}, {1e6 * ours / args.calls:.1f} | "
                f"{theirs / ours:.2f}x |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
