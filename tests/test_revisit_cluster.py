"""The revisit schedule sharded by host over a real 3-master Redis Cluster.

``RedisRevisitStore`` keeps each page in the shard of its URL's host (the frontier's
``LARBIN_REDIS_SHARDS`` hash tags), every script touching one shard; a take asks every shard in
one pipeline, each handing out its due pages in due order, up to its share of the in-flight
limit, and its own flight entries past the lease (a killed worker's) first.
"""

from __future__ import annotations

import collections
import json
from typing import TYPE_CHECKING

import pytest
import redis

from larbinscrapy.distributed.shards import HostShards, key_slot
from larbinscrapy.parse.urls import fingerprint_url, host_of
from larbinscrapy.revisit.entry import Entry
from larbinscrapy.revisit.redis_store import RedisRevisitStore
from tests.support.cluster import redis_cluster
from tests.support.crawl import seeds_args
from tests.support.revisit import EARLY, RULE, by_page, gaps, revisit_entries_per_master
from tests.support.workers import assert_clean_logs, start_worker, wait_workers
from testweb.changing import KINDS, start_changing

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.support.cluster import RedisClusterProcess

REVISIT = {**RULE, "DOWNLOAD_DELAY": 0, "LARBIN_REVISIT_LEASE": 2.0}
HOSTS = 16  # revisited hosts of the crawl: 4 fall in too few of the 32 shards to reach 3 masters
PAGES = sum(KINDS.values()) + 1  # a host's pages and its "/"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcess]:
    with redis_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


def _page(host: str, path: str, due: float) -> Entry:
    url = f"http://{host}/{path}"
    return Entry(fingerprint_url(url), url, due, 10.0)


def _store(
    cluster: RedisClusterProcess, key: str, shards: int = 4, inflight: int = 1000
) -> RedisRevisitStore:
    return RedisRevisitStore(None, key, inflight, connect=cluster.client, shards=HostShards(shards))


def _hosts_by_shard(shards: HostShards, per_shard: int) -> dict[int, list[str]]:
    """``per_shard`` host names of each shard."""
    out: dict[int, list[str]] = collections.defaultdict(list)
    n = 0
    while min((len(out[k]) for k in range(shards.count)), default=0) < per_shard:
        host = f"h{n}.test"
        if len(out[shards.of(host)]) < per_shard:
            out[shards.of(host)].append(host)
        n += 1
    return out


def test_one_shard_keeps_the_keys_of_earlier_versions():
    one = RedisRevisitStore(None, "t:revisit", 10, shards=HostShards(1))
    assert one.shard_keys == [("t:revisit:due", "t:revisit:flight", "t:revisit:state")]
    on_cluster = RedisRevisitStore(None, "t:revisit", 10, connect=lambda: None)
    assert on_cluster.shard_keys == [("{t:revisit}:due", "{t:revisit}:flight", "{t:revisit}:state")]


def test_shard_keys_share_a_slot_and_inflight_is_shared_out():
    store = RedisRevisitStore(None, "t:revisit", 10, connect=lambda: None, shards=HostShards(4))
    assert len({key_slot(k) for k in store.shard_keys[2]}) == 1
    assert len({key_slot(keys[0]) for keys in store.shard_keys}) == 4
    assert store.inflight == 2  # 4 shards x 2: never more than 10 in flight


@pytest.mark.crawl
@pytest.mark.cluster
def test_pages_live_in_their_hosts_shard_spread_over_every_master(cluster):
    store = _store(cluster, "spread:revisit", shards=32)
    hosts = [f"127.9.1.{k}" for k in range(240)]  # look-alike hosts
    for host in hosts:
        assert store.add(_page(host, "a.html", 100.0))
    client = cluster.client()
    for host in hosts[:20]:
        state = store.shard_keys[store.shards.of(host)][2]
        assert client.hexists(state, fingerprint_url(f"http://{host}/a.html"))
    client.close()
    entries = revisit_entries_per_master(cluster, "spread:revisit")
    assert len(entries) == 3 and sum(entries.values()) == 240
    assert min(entries.values()) >= 0.15 * 240, entries


@pytest.mark.crawl
@pytest.mark.cluster
def test_due_order_per_shard_and_each_shards_share_of_the_inflight_limit(cluster):
    store = _store(cluster, "order:revisit", shards=4, inflight=8)  # 2 per shard
    hosts = _hosts_by_shard(store.shards, 2)
    for k in range(4):
        a, b = hosts[k]
        for page in (
            _page(a, "3", 103.0),
            _page(b, "1", 101.0),
            _page(a, "4", 104.0),
            _page(b, "2", 102.0),
        ):
            assert store.add(page)
    assert store.take(100.0, lease=60) == (0, 16, [])  # nothing due yet
    expired, total, taken = store.take(200.0, lease=60)
    assert (expired, total) == (0, 16)
    by_shard = collections.defaultdict(list)
    for entry in taken:
        by_shard[store.shards.of(host_of(entry.url))].append(entry.due)
    assert by_shard == {k: [101.0, 102.0] for k in range(4)}  # the earliest of each, in order
    assert store.take(201.0, lease=60)[2] == []  # every shard's share is in flight
    first = taken[0]
    assert store.done(first, first.evolve(due=900.0, fetch_count=2))
    again = store.take(202.0, lease=60)[2]
    assert [e.due for e in again] == [103.0]  # room in that shard only: its next due page
    assert store.shards.of(host_of(again[0].url)) == store.shards.of(host_of(first.url))
    assert store.count() == 16


@pytest.mark.crawl
@pytest.mark.cluster
def test_forget_on_a_cluster_removes_the_page_from_its_shard(cluster):
    store = _store(cluster, "forget:revisit")
    hosts = _hosts_by_shard(store.shards, 1)
    gone, kept = _page(hosts[0][0], "gone", 100.0), _page(hosts[1][0], "kept", 100.0)
    assert store.add(gone) and store.add(kept)
    taken = {e.url: e for e in store.take(200.0, 3600.0)[2]}
    assert store.forget(taken[gone.url])
    assert not store.forget(taken[gone.url])  # a second copy of the same answer
    assert store.done(taken[kept.url], taken[kept.url].evolve(due=300.0))
    client = cluster.client()
    states = {k: client.hkeys(keys[2]) for k, keys in enumerate(store.shard_keys)}
    assert {k: v for k, v in states.items() if v} == {1: [kept.fp]}
    assert sum(client.zcard(keys[1]) for keys in store.shard_keys) == 0
    client.close()
    assert [e.url for e in store.take(1e12, 3600.0)[2]] == [kept.url]


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_killed_workers_flight_comes_back_from_every_shard_after_the_lease(cluster):
    killed, alive = _store(cluster, "reap:revisit"), _store(cluster, "reap:revisit")
    hosts = _hosts_by_shard(killed.shards, 1)
    pages = [_page(hosts[k][0], "p", 100.0) for k in range(4)]
    for page in pages:
        assert killed.add(page)
    taken = killed.take(200.0, lease=60)[2]  # handed out, never fetched: the worker died
    assert len(taken) == 4
    assert alive.take(259.0, lease=60) == (0, 4, [])  # within the lease: nothing
    expired, total, back = alive.take(261.0, lease=60)
    assert (expired, total) == (4, 4)
    assert sorted(e.url for e in back) == sorted(p.url for p in pages)
    for entry in back:
        assert alive.done(entry, entry.evolve(due=900.0, fetch_count=2))
    assert alive.take(400.0, lease=60) == (0, 4, [])  # done: not handed out again


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_shard_that_fails_does_not_hold_back_the_others(cluster):
    store = _store(cluster, "fail:revisit")
    hosts = _hosts_by_shard(store.shards, 1)
    for k in range(4):
        assert store.add(_page(hosts[k][0], "p", 100.0))
    client = cluster.client()
    broken = store.shard_keys[2][1]
    client.set(broken, b"not a sorted set")  # shard 2's script fails (WRONGTYPE)
    _, total, taken = store.take(200.0, lease=60)
    assert total is None  # not known: the schedule is not taken for empty
    assert sorted(store.shards.of(host_of(e.url)) for e in taken) == [0, 1, 3]
    client.delete(broken)
    client.close()
    assert [e.url for e in store.take(201.0, lease=60)[2]] == [f"http://{hosts[2][0]}/p"]


def _command_calls(cluster: RedisClusterProcess, command: str) -> int:
    total = 0
    for port in cluster.ports:
        node = redis.Redis(host="127.0.0.1", port=port)
        total += node.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0)
        node.close()
    return total


@pytest.mark.crawl
@pytest.mark.cluster
def test_a_take_is_one_script_call_per_shard_and_no_key_lookups(cluster):
    # redis-py's cluster pipeline asked a node for every EVALSHA's keys (COMMAND GETKEYS, one
    # round trip each) before sending the pipeline; the workers' client routes by the key slot
    store = _store(cluster, "getkeys:revisit", shards=32)
    store.take(100.0, lease=60)  # loads the script
    for port in cluster.ports:
        node = redis.Redis(host="127.0.0.1", port=port)
        node.config_resetstat()
        node.close()
    store.take(101.0, lease=60)
    assert (_command_calls(cluster, "evalsha"), _command_calls(cluster, "command|getkeys")) == (
        32,
        0,
    )


@pytest.mark.crawl
@pytest.mark.cluster
def test_two_workers_revisit_sharded_over_every_master(tmp_path):
    with (
        redis_cluster(tmp_path / "cluster") as cluster,
        start_changing(tmp_path / "web", period=3.0, hosts=HOSTS) as web,
    ):
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                cluster.url,
                *seeds_args(web.seeds),
                CLOSESPIDER_TIMEOUT=12,
                LARBIN_REDIS_CLUSTER=True,
                **REVISIT,
            )
            for i in range(2)
        ]
        wait_workers(procs, timeout=90)
        log = web.read_log()
        entries = revisit_entries_per_master(cluster)
    assert_clean_logs(procs)
    pages = by_page(log, web.revisit_hosts)
    assert len(pages) == HOSTS * PAGES
    for key, records in pages.items():
        kind = key.split("/")[1] or "never"
        assert all(r["inm"] or r["ims"] for r in records[1:]) or kind == "plain", (key, records)
        if kind in ("never", "lmonly", "plain"):  # one schedule for both: 1, 1, 2, 2 s apart
            got = gaps(records)
            assert len(got) >= 3, (key, got)
            for gap, due in zip(got, [1, 1, 2, 2, 4], strict=False):
                assert gap >= due - EARLY, (key, got)
    assert sum(r["status"] == 304 for r in log) >= HOSTS * KINDS["never"]
    assert sum(entries.values()) == HOSTS * PAGES  # every page scheduled once
    assert min(entries.values()) >= 0.15 * HOSTS * PAGES, entries  # on every master
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert all(s.get("larbin/revisit/due", 0) for s in stats), stats  # both workers revisit
    assert not any(s.get("larbin/revisit/take_failed") for s in stats), stats
