"""Near-duplicates (``LARBIN_CONTENT_DUP_NEAR_DISTANCE``) shared by every Redis worker: the index
(``larbinscrapy/distributed/neardup.py``) against a real redis-server and a real 3-master
cluster, and 2-worker crawls of a web of near-duplicate pages judged against a local crawl."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest
import redis

from larbinscrapy.distributed.jobs import run_call, run_calls
from larbinscrapy.distributed.neardup import NearIndex, Verdict
from larbinscrapy.pipelines.contentdup import SimhashIndex, simhash
from tests.support.cluster import redis_cluster
from tests.support.crawl import run_crawl, seeds_args
from tests.support.workers import assert_clean_logs, start_worker, wait_workers
from testweb import neardup

if TYPE_CHECKING:
    from pathlib import Path

BASE = 0x8123_4567_89AB_CDEF  # bits 63 and 31 set: the halves' sign bits in Lua's bit library
HOSTS, PAGES, DISTANCE = 6, 5, 5


def flip(h: int, bits: list[int]) -> int:
    for bit in bits:
        h ^= 1 << bit
    return h


def one_per_block(index: NearIndex, count: int) -> list[int]:
    """``count`` bit positions, each in a different block (the block's top bit)."""
    return [shift + mask.bit_length() - 1 for shift, mask in index.blocks][:count]


def check(server: Any, index: NearIndex, h: int, url: str, digest: bytes | None = None) -> Verdict:
    digest = digest or hashlib.md5(url.encode()).digest()
    return run_call(server, index.check_call("t:contentdup", digest, url, h))


# --- the index, pure ----------------------------------------------------------------------


@pytest.mark.parametrize("distance", [1, 3, 5, 6, 31])
def test_blocks_split_the_64_bits_as_the_local_index_does(distance):
    index = NearIndex("t:near", distance)
    assert index.blocks == SimhashIndex(distance)._blocks
    assert len(index.blocks) == distance + 1
    values = index.block_values(BASE)
    assert sum(v << shift for v, (shift, _) in zip(values, index.blocks, strict=True)) == BASE
    fields = index.fields(BASE)
    assert len(set(fields)) == distance + 1 and [f[0] for f in fields] == list(range(distance + 1))


def test_the_home_bucket_is_the_first_block_two_fingerprints_share():
    index = NearIndex("t:near", 3)
    bits = one_per_block(index, 4)
    assert index.home(BASE, flip(BASE, bits[:1])) == 1  # block 0 differs
    assert index.home(BASE, flip(BASE, bits[:3])) == 3
    assert index.home(BASE, flip(BASE, bits)) is None  # 4 bits apart: no block in common
    assert index.home(BASE, BASE) == 0


def test_buckets_spread_over_the_shards_of_a_cluster():
    index = NearIndex("larbin:contentdup:near", 6, shards=32)
    rng = random.Random(7)
    keys = Counter(index.key_of(f) for _ in range(500) for f in index.fields(rng.getrandbits(64)))
    assert len(keys) == 32 and min(keys.values()) >= 0.5 * 500 * 7 / 32, keys
    assert all(k.startswith("{s") and k.endswith("}larbin:contentdup:near") for k in keys)


# --- one Redis: the whole check in one script -----------------------------------------------


@pytest.mark.crawl
@pytest.mark.parametrize("distance", [1, 3, 6])
def test_a_stored_fingerprint_is_found_at_distance_d_and_not_at_d_plus_1(redis_url, distance):
    server = redis.Redis.from_url(redis_url)
    index = NearIndex("t:near", distance)
    spread = one_per_block(index, distance + 1)
    packed = list(range(distance + 1))  # every flip in block 0: the other blocks match
    for n, bits in enumerate([spread, packed]):
        server.flushall()
        assert check(server, index, BASE, "http://kept.test/") == Verdict("kept")
        for flips in range(distance + 2):
            probe = flip(BASE, bits[:flips])
            got = check(server, index, probe, f"http://probe.test/{n}/{flips}")
            if flips <= distance:
                assert got == Verdict("near", flips), (bits, flips)
            else:  # d + 1 bits: a candidate of block 1.. (packed) or of none (spread), not a twin
                assert got == Verdict("kept"), (bits, flips)


@pytest.mark.crawl
def test_the_script_distance_is_python_s_on_random_fingerprints(redis_url):
    server = redis.Redis.from_url(redis_url)
    index = NearIndex("t:near", 31)  # 2-bit blocks: random pairs share one, Lua sees them all
    rng = random.Random(1)
    found = 0
    for _ in range(300):
        server.flushall()
        a, b = rng.getrandbits(64), rng.getrandbits(64)
        assert check(server, index, a, "http://a.test/") == Verdict("kept")
        got = check(server, index, b, "http://b.test/")
        if index.home(a, b) is None or (a ^ b).bit_count() > 31:
            assert got == Verdict("kept"), (hex(a), hex(b))
        else:
            assert got == Verdict("near", (a ^ b).bit_count()), (hex(a), hex(b))
            found += 1
    assert found > 100


@pytest.mark.crawl
def test_exact_copies_first_and_a_page_is_never_its_own_near_copy(redis_url):
    server = redis.Redis.from_url(redis_url)
    index = NearIndex("t:near", 3)
    digest = b"d" * 16
    assert check(server, index, BASE, "http://a.test/", digest) == Verdict("kept")
    assert check(server, index, BASE, "http://b.test/", digest) == Verdict("dup", "http://a.test/")
    assert check(server, index, BASE, "http://a.test/", digest) == Verdict("dup", "http://a.test/")
    edited = flip(BASE, [0, 1])  # the same URL fetched again, a little changed: not a copy
    assert check(server, index, edited, "http://a.test/") == Verdict("kept")
    assert check(server, index, flip(BASE, [2]), "http://c.test/") == Verdict("near", 1)
    assert check(server, index, 0, "http://short.test/") == Verdict("kept")  # no simhash
    # a near-dropped page left nothing behind: neither its hash nor its fingerprint
    assert server.hlen("t:contentdup") == 3
    assert sum(len(v) for v in server.hvals("t:near")) == 2 * 4 * 17


# --- a cluster: one script per slot, the home-bucket rule -------------------------------------


def _run_slots(
    client: Any,
    index: NearIndex,
    h: int,
    url: str,
    with_block: int | None = None,
    without_block: int | None = None,
) -> list[Any]:
    """Run ``h``'s slot scripts (those holding ``with_block``, or those without one)."""
    twins = []
    for blocks, call in index.slot_calls(h, url):
        if with_block not in (None, *blocks) or without_block in blocks:
            continue
        twins += run_call(client, call)
    return twins


@pytest.mark.crawl
@pytest.mark.cluster
def test_two_near_twins_checked_at_once_on_a_cluster_exactly_one_loses(tmp_path):
    index = NearIndex("larbin:contentdup:near", 3, shards=12)
    bits = one_per_block(index, 4)
    rng = random.Random(3)
    while True:  # a pair sharing blocks 0 and 2, whose buckets are in different slots
        p = rng.getrandbits(64)
        t = flip(p, [bits[1], bits[3]])
        groups = {b: key for key, g in index.by_key(p).items() for b, _ in g}
        if groups[0] != groups[2]:
            break
    assert index.home(p, t) == 0
    with redis_cluster(tmp_path / "cluster") as cluster:
        client = cluster.client()
        # the two checks interleave: t first in bucket 2, p first in bucket 0 (their home)
        t_early = _run_slots(client, index, t, "http://t.test/", with_block=2)
        p_twins = _run_slots(client, index, p, "http://p.test/")
        t_twins = t_early + _run_slots(client, index, t, "http://t.test/", without_block=2)
        assert [tw.block for tw in p_twins] == [2]  # p saw t, outside their home bucket
        assert index.loses_to(p, p_twins) is None
        lost = index.loses_to(t, t_twins)
        assert lost is not None and lost.simhash == p and lost.distance == 2
        assert not lost.settled  # p's verdict was not settled yet: counted as a race
        for kept, h, url in ((True, p, "http://p.test/"), (False, t, "http://t.test/")):
            for call in index.settle_calls(h, url, kept):
                run_call(client, call)
        # settled: a third twin meets p, kept, in every bucket; t left nothing
        third = _run_slots(client, index, flip(p, [bits[2]]), "http://third.test/")
        assert {tw.simhash for tw in third} == {p} and all(tw.settled for tw in third)
        assert index.loses_to(flip(p, [bits[2]]), third) is not None
        client.close()


def _twin_groups(index: NearIndex, groups: int, size: int) -> list[tuple[int, int, str]]:
    """(group, simhash, URL) of ``groups`` groups of ``size`` pages, each within 2 bits of the
    others of its group (one bit of its own flipped), shuffled."""
    rng = random.Random(5)
    spread = one_per_block(index, index.distance + 1)
    pages = []
    for g in range(groups):
        base = rng.getrandbits(64)
        pages += [
            (g, flip(base, [spread[k % len(spread)] - k // len(spread)]), f"http://g{g}.test/{k}")
            for k in range(size)
        ]
    rng.shuffle(pages)
    return pages


def _race(pages: list[tuple[int, int, str]], check: Any, threads: int = 4) -> Counter[int]:
    """Check ``pages`` from ``threads`` threads at once; the groups of the pages kept."""
    kept: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def work(part: list[tuple[int, int, str]]) -> None:
        start.wait()
        for i in range(0, len(part), 8):  # a few pages per round trip, as a worker's batch
            batch = part[i : i + 8]
            for (group, _, _), keep in zip(batch, check(batch), strict=True):
                if keep:
                    with lock:
                        kept[group] += 1

    runners = [threading.Thread(target=work, args=(pages[t::threads],)) for t in range(threads)]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    return kept


@pytest.mark.crawl
def test_near_twins_checked_by_four_clients_at_once_one_kept_per_group(redis_url):
    index = NearIndex("t:near", 3)
    pages = _twin_groups(index, 40, 6)
    local = threading.local()

    def check_batch(batch: list[tuple[int, int, str]]) -> list[bool]:
        if not hasattr(local, "server"):
            local.server = redis.Redis.from_url(redis_url)
        calls = [
            index.check_call("t:contentdup", hashlib.md5(url.encode()).digest(), url, h)
            for _, h, url in batch
        ]
        return [v == Verdict("kept") for v in run_calls(local.server, calls)]

    assert _race(pages, check_batch) == Counter(dict.fromkeys(range(40), 1))


@pytest.mark.crawl
@pytest.mark.cluster
def test_near_twins_checked_by_four_clients_at_once_on_a_cluster(tmp_path):
    index = NearIndex("larbin:contentdup:near", 3, shards=12)
    pages = _twin_groups(index, 40, 6)
    local = threading.local()
    with redis_cluster(tmp_path / "cluster") as cluster:

        def check_batch(batch: list[tuple[int, int, str]]) -> list[bool]:
            if not hasattr(local, "client"):
                local.client = cluster.client()
            slots = [index.slot_calls(h, url) for _, h, url in batch]
            replies = iter(run_calls(local.client, [c for page in slots for _, c in page]))
            verdicts = []
            for (_, h, url), page in zip(batch, slots, strict=True):
                twins = [t for _ in page for t in next(replies)]
                keep = index.loses_to(h, twins) is None
                run_calls(local.client, index.settle_calls(h, url, keep))
                verdicts.append(keep)
            return verdicts

        kept = _race(pages, check_batch)
    assert kept == Counter(dict.fromkeys(range(40), 1))


# --- crawls: 2 workers against a local crawl --------------------------------------------------


def _bodies_are_near_groups() -> None:
    """The web's premise: the copies of a path within DISTANCE, two paths far apart."""
    sims = {(k, i): simhash(neardup.body(k, i, PAGES)) for k in range(HOSTS) for i in range(PAGES)}
    for a, sa in sims.items():
        for b, sb in sims.items():
            assert ((sa ^ sb).bit_count() <= DISTANCE) == (a[1] == b[1]), (a, b)


def _items(out: Path) -> list[str]:
    path = out / "items.jsonl"
    return [json.loads(line)["url"] for line in path.read_text().splitlines() if line.strip()]


def _kept_paths(urls: list[str]) -> Counter[str]:
    return Counter("/" + u.split("/", 3)[3] for u in urls)


def _two_workers(
    web: Any, tmp_path: Path, redis_url: str, **settings: Any
) -> tuple[list[str], int]:
    """The URLs both workers kept, and how many they dropped as near-duplicates."""
    procs = [
        start_worker(
            web,
            tmp_path / f"w{i}",
            redis_url,
            *seeds_args(web.seeds),
            LARBIN_CONTENT_DUP_NEAR_DISTANCE=DISTANCE,
            **settings,
        )
        for i in range(2)
    ]
    wait_workers(procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    assert all(s.get("response_received_count", 0) for s in stats), stats  # both crawled
    dropped = sum(s.get("larbin/contentdup/near_dropped", 0) for s in stats)
    return [url for p in procs for url in _items(p.out)], dropped


@pytest.mark.crawl
def test_two_workers_keep_one_page_per_near_duplicate_group_as_a_local_crawl(tmp_path, redis_url):
    _bodies_are_near_groups()
    with neardup.start(tmp_path / "web", HOSTS, PAGES) as web:
        local = run_crawl(
            web,
            tmp_path / "local",
            *seeds_args(web.seeds),
            settings={"LARBIN_CONTENT_DUP_NEAR_DISTANCE": DISTANCE},
        )
        assert local.returncode == 0, local.stderr[-3000:]
        web.log_path.write_text("")
        kept, dropped = _two_workers(web, tmp_path, redis_url)
        fetched = Counter(
            f"http://{e['host']}:{web.port}{e['path']}"
            for e in web.read_log()
            if e["status"] == 200
        )
    local_kept = _kept_paths([i["url"] for i in local.items])
    assert local_kept == Counter(dict.fromkeys(neardup.paths(PAGES), 1))  # one per group
    assert len(kept) == len(local.items) and len(set(kept)) == len(kept)  # none twice
    assert _kept_paths(kept) == local_kept
    assert dropped == HOSTS * PAGES - PAGES
    assert set(fetched) == web.page_urls() and max(fetched.values()) == 1


@pytest.mark.crawl
@pytest.mark.cluster
def test_two_workers_share_near_duplicates_on_a_cluster(tmp_path):
    with (
        redis_cluster(tmp_path / "cluster") as cluster,
        neardup.start(tmp_path / "web", HOSTS, PAGES) as web,
    ):
        kept, dropped = _two_workers(
            web, tmp_path, cluster.url, LARBIN_REDIS_CLUSTER=True, LARBIN_REDIS_SHARDS=12
        )
        client = cluster.client()
        keys = NearIndex("larbin:contentdup:near", DISTANCE, shards=12).keys
        stored = sum(len(v) for k in keys for v in client.hvals(k))
        client.close()
    assert len(set(kept)) == len(kept) == PAGES
    assert _kept_paths(kept) == Counter(dict.fromkeys(neardup.paths(PAGES), 1))
    assert dropped == HOSTS * PAGES - PAGES
    assert stored == PAGES * (DISTANCE + 1) * 17  # the losers' entries were removed
