"""Distributed mode on a real 3-master Redis Cluster (``tests/support/cluster.py``).

``-s LARBIN_REDIS_CLUSTER=True`` with ``REDIS_URL`` naming one node: the workers find the
others, the frontier is sharded by host over ``LARBIN_REDIS_SHARDS`` hash tags, and per-IP
politeness holds across shards through each IP's own lease key. Marked ``cluster`` (select
with ``-m cluster``); never skipped: ``make test`` installs redis-server.
"""

from __future__ import annotations

import collections
import signal
import time
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.distributed.shards import SLOTS, Shards, key_slot, spread_tags
from tests.support.cluster import cluster_port, redis_cluster
from tests.support.crawl import seeds_args
from tests.support.workers import (
    CLUSTER,
    TOLERANCE,
    WORKER_DELAY,
    assert_clean_logs,
    cluster_workers_under_way,
    fetched_twice,
    min_interval_per_ip,
    start_worker,
    wait_workers,
)
from testweb.harness import pages

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("count", [1, 3, 12, 64, 1024])
def test_shard_tags_fall_one_in_each_slot_range(count):
    tags = spread_tags(count)
    assert len(set(tags)) == count
    for i, tag in enumerate(tags):
        assert i * SLOTS // count <= key_slot(f"{{{tag}}}x") < (i + 1) * SLOTS // count


def test_look_alike_hosts_spread_over_shards_and_masters():
    shards = Shards(12, "larbin:frontier", "larbin:seen", 10**6)
    for hosts in (
        [f"127.9.1.{k}" for k in range(240)],
        [f"www{k}.example.com" for k in range(240)],
    ):
        per_shard = collections.Counter(shards.of(h) for h in hosts)
        assert len(per_shard) == 12 and min(per_shard.values()) >= 8, per_shard
        # three masters holding a third of the slots each
        per_master = collections.Counter(
            key_slot(shards.prefix(shards.of(h))) * 3 // SLOTS for h in hosts
        )
        assert min(per_master.values()) >= 0.2 * len(hosts), per_master


def test_one_shard_keeps_the_single_redis_keys():
    shards = Shards(1, "larbin:frontier", "larbin:seen", 10**6)
    assert (shards.prefix(0), shards.seen_key(0), shards.of("a.test")) == (
        "larbin:frontier",
        "larbin:seen",
        0,
    )
    assert shards.positions([5, 10**6 - 1]) == [5, 10**6 - 1]


def _crawl_checks(web, procs, records) -> None:
    truth = web.web.ground_truth(web.seeds, depth=5)
    assert pages(records, web.port) == truth
    assert fetched_twice(records, web.port) == []
    intervals = min_interval_per_ip(records)
    assert min(intervals.values()) >= WORKER_DELAY - TOLERANCE, intervals


@pytest.mark.crawl
@pytest.mark.cluster
def test_two_workers_crawl_once_and_politely_on_a_cluster(web, tmp_path: Path):
    with redis_cluster(tmp_path / "cluster") as cluster:
        url = f"redis://127.0.0.1:{cluster.ports[2]}/0"  # any node
        client = cluster.client()
        client.lpush("larbin:start_urls", *web.seeds)  # the scrapy-redis way, in its own slot
        client.close()
        procs = [start_worker(web, tmp_path / f"w{i}", url, **CLUSTER) for i in range(2)]
        wait_workers(procs)
        assert [p.returncode for p in procs] == [0, 0]
        assert_clean_logs(procs)
        _crawl_checks(web, procs, web.read_log())
        items = [len((p.out / "items.jsonl").read_text().splitlines()) for p in procs]
        assert all(items), items
        keys = cluster.keys_per_master()
        assert min(keys.values()) >= 0.15 * sum(keys.values()), keys


@pytest.mark.crawl
@pytest.mark.cluster
def test_kill_one_worker_on_a_cluster_loses_nothing(web, tmp_path: Path):
    with redis_cluster(tmp_path / "cluster") as cluster:
        procs = [
            start_worker(web, tmp_path / f"w{i}", cluster.url, *seeds_args(web.seeds), **CLUSTER)
            for i in range(2)
        ]
        deadline = time.monotonic() + 60
        while len(pages(web.read_log(), web.port)) < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        procs[0].send_signal(signal.SIGKILL)
        wait_workers(procs)
        assert procs[1].returncode == 0
        assert_clean_logs(procs[1:])
        records = web.read_log()
        truth = web.web.ground_truth(web.seeds, depth=5)
        assert pages(records, web.port) == truth
        assert min(min_interval_per_ip(records).values()) >= WORKER_DELAY - TOLERANCE
        assert "Reaped 1 silent worker" in (procs[1].out / "stderr.log").read_text()


@pytest.mark.crawl
@pytest.mark.cluster
def test_unreachable_cluster_at_start_is_one_line_and_exit_1(web, tmp_path: Path):
    port = cluster_port()  # nothing listens there
    proc = start_worker(
        web, tmp_path / "w", f"redis://127.0.0.1:{port}/0", *seeds_args(web.seeds), **CLUSTER
    )
    wait_workers([proc], timeout=90)
    log = (proc.out / "stderr.log").read_text()
    assert proc.returncode == 1, log[-2000:]
    assert "Traceback" not in log, log[-3000:]
    assert log.count(f"cannot reach Redis at redis://127.0.0.1:{port}/0") == 1, log[-2000:]


@pytest.mark.crawl
@pytest.mark.cluster
def test_master_restarted_mid_crawl_workers_wait_and_go_on(web, tmp_path: Path):
    """appendonly yes (appendfsync everysec), SIGTERM: what Redis wrote comes back with it.
    The lease timeout is the default's order, as in the reshard test: with the 3 s of the kill
    tests, a restart that takes longer on a loaded machine gets a live worker's leases reaped
    and their pages fetched again (at-least-once, by design), which is not what this tests."""
    with redis_cluster(tmp_path / "cluster", appendonly=True) as cluster:
        procs = cluster_workers_under_way(web, tmp_path, cluster.url)
        cluster.restart(1)
        wait_workers(procs)
        assert [p.returncode for p in procs] == [0, 0]
        assert_clean_logs(procs)
        _crawl_checks(web, procs, web.read_log())
        logs = [(p.out / "stderr.log").read_text() for p in procs]
        for log in logs:  # each outage is one line, and its end another
            assert log.count("(counted in larbin/redis/failed until Redis answers again)") <= 1
        assert any("Redis answers again" in log for log in logs), logs[0][-3000:]


@pytest.mark.crawl
@pytest.mark.cluster
def test_reshard_mid_crawl_loses_nothing(web, tmp_path: Path):
    """``redis-cli --cluster reshard`` moves an eighth of the slots while two workers crawl:
    the clients follow MOVED/ASK (a step that meets a moving slot is retried). The lease timeout
    is the default's order, not the 3 s of the kill tests: a master busy with MIGRATE on a
    loaded machine must not get a live worker reaped (docs/distributed.md, limits)."""
    with redis_cluster(tmp_path / "cluster") as cluster:
        procs = cluster_workers_under_way(web, tmp_path, cluster.url)
        before = cluster.master_of_slot()
        cluster.reshard(0, 1, 2000)
        after = cluster.master_of_slot()
        assert sum(before[s] != after[s] for s in before) == 2000
        wait_workers(procs)
        assert [p.returncode for p in procs] == [0, 0]
        assert_clean_logs(procs)
        _crawl_checks(web, procs, web.read_log())
