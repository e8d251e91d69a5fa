"""Growing a Redis Cluster under a running crawl, as docs/distributed.md ("Capacity", growing
without stopping) says: ``redis-cli --cluster add-node`` an empty master, then ``--cluster
rebalance --cluster-use-empty-masters --cluster-pipeline 1000000`` while two workers crawl. The
new master ends up serving slots (and keys), the workers follow MOVED/ASK, every page is fetched
once and both workers end cleanly (``tests/test_distributed_cluster.py`` moves slots between the
first masters; this one adds a node)."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest
import redis

from tests.support.cluster import REDIS_CLI, cluster_port, redis_cluster
from tests.support.wait import wait_for
from tests.support.workers import assert_clean_logs, cluster_workers_under_way, wait_workers
from tests.test_distributed_cluster import _crawl_checks
from testweb.harness import pages

if TYPE_CHECKING:
    from pathlib import Path

    from tests.support.cluster import RedisClusterProcess


def _cluster_cli(*args: str) -> None:
    """``redis-cli --cluster ARGS``, failing with its output."""
    done = subprocess.run(
        [REDIS_CLI, "--cluster", *args], check=False, capture_output=True, timeout=300
    )
    assert done.returncode == 0, done.stdout.decode()[-2000:]


def _all_know(ports: list[int], node_id: str) -> bool:
    """Every node lists ``node_id`` in ``CLUSTER NODES`` (gossip has reached it)."""
    return all(node_id in str(_client(p).execute_command("CLUSTER NODES")) for p in ports)


def _client(port: int) -> redis.Redis:
    return redis.Redis(port=port, decode_responses=True)


def add_master(cluster: RedisClusterProcess) -> int:
    """Start a fourth node and join it as an empty master (``add-node``): its port."""
    cluster.ports.append(cluster_port())
    cluster.start_node(len(cluster.ports) - 1)
    new, first = (f"127.0.0.1:{cluster.ports[i]}" for i in (-1, 0))
    _cluster_cli("add-node", new, first)
    # a rebalance moving a slot through a node that has not met the new one yet fails ("I
    # don't know about node"): gossip takes a moment
    node_id = _client(cluster.ports[-1]).execute_command("CLUSTER MYID")
    wait_for(lambda: _all_know(cluster.ports, node_id), timeout=60, what="every node knows it")
    wait_for(cluster.healthy, timeout=60, what="the cluster ok")
    return cluster.ports[-1]


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_master_added_and_rebalanced_mid_crawl_loses_nothing(web, tmp_path: Path) -> None:
    with redis_cluster(tmp_path / "cluster") as cluster:
        procs = cluster_workers_under_way(web, tmp_path, cluster.url)
        port = add_master(cluster)
        assert port not in cluster.masters()  # add-node moves nothing
        _cluster_cli(
            "rebalance",
            f"127.0.0.1:{cluster.ports[0]}",
            "--cluster-use-empty-masters",
            "--cluster-pipeline",
            "1000000",
        )
        assert port in cluster.masters()
        fetched = len(pages(web.read_log(), web.port))
        assert any(p.poll() is None for p in procs), "the crawl ended before the rebalance did"
        wait_workers(procs)
        assert len(pages(web.read_log(), web.port)) > fetched  # pages fetched after the move
        assert [p.returncode for p in procs] == [0, 0]
        assert_clean_logs(procs)
        _crawl_checks(web, procs, web.read_log())
        assert cluster.keys_per_master()[port] > 0  # shards moved to the new master
