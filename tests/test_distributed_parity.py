"""Parity of the Redis workers with the one-process crawl, across 2 workers on one real
redis-server: what one worker learnt about a site (robots.txt...) the other does not ask again."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.crawl import seeds_args
from tests.support.workers import (
    TOLERANCE,
    WORKER_DELAY,
    assert_clean_logs,
    fetched_twice,
    min_interval_per_ip,
    start_worker,
    wait_workers,
)
from testweb.harness import ROBOTS, pages


def _robots_counts(records: list[dict], port: int) -> Counter[str]:
    return Counter(f"{e['host']}:{port}" for e in records if e["path"] == ROBOTS)


@pytest.mark.crawl
def test_robots_txt_fetched_once_per_site_by_all_workers(web, tmp_path, redis_url):
    truth = web.web.ground_truth(web.seeds, depth=5)
    procs = [start_worker(web, tmp_path / f"w{i}", redis_url, *seeds_args(web.seeds))
             for i in range(2)]
    wait_workers(procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    records = web.read_log()
    assert pages(records, web.port) == truth
    assert fetched_twice(records, web.port) == []
    robots = _robots_counts(records, web.port)
    sites = {u.split("/")[2] for u in truth}
    assert set(robots) == sites
    assert {s: n for s, n in robots.items() if n != 1} == {}
    assert min(min_interval_per_ip(records).values()) >= WORKER_DELAY - TOLERANCE
    shared = sum("larbin/robots/shared" in (p.out / "stderr.log").read_text() for p in procs)
    assert shared >= 1
