"""A worker's batch of Redis calls on a Redis Cluster (``lean/rediscluster.pipelined``).

The batch goes to each master in one write; what that did not settle goes to redis-py's own
cluster pipeline. What a worker relies on: every reply is its own command's, a master that is
down fails only its own commands (a pop that ran on another master is never reported failed:
its lease would be held by a live worker that thinks it has none), and a slot that moved is
followed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import redis

from larbinscrapy.distributed.jobs import Call, LuaScript, run_calls
from larbinscrapy.lean.rediscluster import pipelined
from tests.support.cluster import redis_cluster

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.crawl, pytest.mark.cluster]

KEYS = [f"{{s{i}}}:n" for i in range(32)]  # 32 slots over the 3 masters
INCR = LuaScript("return redis.call('INCR', KEYS[1])")


def _incr_calls() -> list[Call]:
    return [Call.script_call(INCR, key, []) for key in KEYS]


def _commands_per_master(cluster: Any) -> dict[int, int]:
    """EVALSHA calls each master has run so far (``INFO commandstats``)."""
    out = {}
    for port in cluster.masters():
        stats = redis.Redis(port=port).info("commandstats")
        out[port] = int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
    return out


def test_a_batch_is_answered_in_order_with_one_script_call_a_command(tmp_path: Path):
    with redis_cluster(tmp_path / "cluster") as cluster:
        client = cluster.client()
        assert run_calls(client, _incr_calls()) == [1] * len(KEYS)
        assert run_calls(client, _incr_calls()) == [2] * len(KEYS)
        assert sum(_commands_per_master(cluster).values()) == 2 * len(KEYS)  # nothing twice
        assert pipelined(client, [("GET", k) for k in KEYS]) == [b"2"] * len(KEYS)


def test_a_master_down_fails_its_own_commands_only(tmp_path: Path):
    with redis_cluster(tmp_path / "cluster") as cluster:
        client = cluster.client()
        run_calls(client, _incr_calls())
        owner = cluster.master_of_slot()
        victim = sorted(cluster.masters())[1]
        down = {k for k in KEYS if owner[client.keyslot(k)] == victim}
        assert 0 < len(down) < len(KEYS)
        cluster.kill(cluster.ports.index(victim))
        replies = run_calls(client, _incr_calls())
        for key, reply in zip(KEYS, replies, strict=True):
            if key in down:
                assert isinstance(reply, redis.RedisError), (key, reply)
            else:
                assert reply == 2, (key, reply)  # ran once, and its reply says so
        for port in cluster.masters() - {victim}:
            node = redis.Redis(port=port)
            for key in set(KEYS) - down:
                if owner[client.keyslot(key)] == port:
                    assert node.get(key) == b"2"


def test_a_slot_moved_to_another_master_is_followed(tmp_path: Path):
    with redis_cluster(tmp_path / "cluster") as cluster:
        client = cluster.client()
        run_calls(client, _incr_calls())
        ports = sorted(cluster.masters())
        before = cluster.master_of_slot()
        cluster.reshard(cluster.ports.index(ports[0]), cluster.ports.index(ports[1]), 2000)
        moved = [
            k
            for k in KEYS
            if before[client.keyslot(k)] != cluster.master_of_slot()[client.keyslot(k)]
        ]
        assert moved  # the client's slot map is now stale for these keys
        assert run_calls(client, _incr_calls()) == [2] * len(KEYS)
        assert run_calls(client, _incr_calls()) == [3] * len(KEYS)
