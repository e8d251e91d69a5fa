"""A master killed (``kill -9``) mid-crawl on a Redis Cluster with a replica per master.

The replica is promoted ``cluster-node-timeout`` later; the two workers wait through the outage
(one line each), follow the new master and finish the crawl. What docs/distributed.md promises
for a failover: nothing queued is lost but the writes the replica missed (none, here: the
replication on loopback is not behind), and a page is fetched twice only if its lease was
handed out in the window and reaped (counted in ``larbin/distributed/requeued``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from tests.support.cluster import redis_cluster
from tests.support.workers import (
    TOLERANCE,
    WORKER_DELAY,
    assert_clean_logs,
    cluster_workers_under_way,
    fetched_twice,
    min_interval_per_ip,
    wait_workers,
)
from testweb.harness import page_counts, pages

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_master_killed_mid_crawl_fails_over_to_its_replica(web, tmp_path: Path):
    # the lease timeout is the default's order (as the restart and reshard tests): the failover
    # takes cluster-node-timeout (5 s) and more, and the workers' heartbeats on that shard fail
    with redis_cluster(tmp_path / "cluster", replicas=1) as cluster:
        procs = cluster_workers_under_way(web, tmp_path, cluster.url)
        masters = cluster.masters()
        victim = next(i for i, p in enumerate(cluster.ports) if p in masters and i > 0)
        killed_at = time.time()
        cluster.kill(victim)
        cluster.wait_failover(cluster.ports[victim])
        promoted_at = time.time()
        wait_workers(procs)
        assert len(cluster.masters()) == 3
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    records = web.read_log()
    assert pages(records, web.port) == web.web.ground_truth(web.seeds, depth=5)  # nothing lost
    assert min(min_interval_per_ip(records).values()) >= WORKER_DELAY - TOLERANCE
    twice = fetched_twice(records, web.port)
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    requeued = sum(s.get("larbin/distributed/requeued", 0) for s in stats)
    assert len(twice) <= requeued, (twice, requeued)  # each one a reaped lease, counted
    first = {}
    for e in records:
        first.setdefault(f"http://{e['host']}:{web.port}{e['path']}", e["t"])
    # fetched twice only if first fetched in the window (its lease handed out before the reply
    # or the replication was lost)
    assert all(killed_at - 5 <= first[u] <= promoted_at for u in twice), (twice, killed_at)
    assert max(page_counts(records, web.port).values()) <= 2
    logs = [(p.out / "stderr.log").read_text() for p in procs]
    for log in logs:  # the outage is one line, and its end another
        assert log.count("(counted in larbin/redis/failed until Redis answers again)") <= 1
    assert any("Redis answers again" in log for log in logs), logs[0][-3000:]
