"""Distributed mode: every worker serves its own status page, with the shared frontier's sizes
from Redis, and ``POST /api/urls`` on any worker feeds the shared frontier."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.status import LiveCrawl, port_range
from tests.support.wait import wait_stable

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

DISTRIBUTED = {"SCRAPY_SETTINGS_MODULE": "settings.distributed"}


def test_each_worker_its_page_and_urls_go_to_the_shared_frontier(
    web: RunningWeb, tmp_path: Path, redis_url: str
) -> None:
    settings = {
        "REDIS_URL": redis_url,
        "DOWNLOAD_DELAY": 0.5,
        "LARBIN_REDIS_KEEP_ALIVE": True,
        "LARBIN_STATUS_PORT": port_range(10),
    }
    workers: list[LiveCrawl] = []
    try:
        for name in ("w1", "w2"):
            workers.append(LiveCrawl(web, tmp_path / name, settings=settings, env=DISTRIBUTED))
        one, two = workers
        assert one.address != two.address
        one.wait_until(
            lambda: one.status()["frontier"].get("shared", {}).get("workers") == 2,
            20,
            "the status page does not show the two workers from Redis",
        )
        shared = one.status()["frontier"]["shared"]
        assert {"queued", "leased", "seeds", "workers"} <= set(shared)
        _, metrics = one.call("GET", "/metrics")
        assert 'larbin_shared_frontier{count="workers"} 2.0' in metrics

        added = f"http://h04.test:{web.port}/added-to-the-shared-frontier"
        code, answer = two.call("POST", "/api/urls", {"urls": [added], "priority": True})
        assert code == 200 and answer["queued"] == 1, answer
        two.wait_until(
            lambda: any(e["path"] == "/added-to-the-shared-frontier" for e in two.requests()),
            30,
            "the URL posted to a worker was not fetched",
        )
        assert answer["seen_test"] == "shared frontier, at admission"
        # The seen-set is shared too: posted again to the other worker, Redis drops it. Both
        # paused, so no page adds links meanwhile: the counters move for this URL only.
        for worker in workers:
            assert worker.call("POST", "/api/pause")[0] == 200

        def counters() -> list[tuple[int, int]]:
            return [
                (
                    w.status()["stats"].get("larbin/frontier/enqueued", 0),
                    w.status()["stats"].get("larbin/dupefilter/filtered", 0),
                )
                for w in workers
            ]

        wait_stable(counters, 1.0, 20, "what was in flight, parsed and admitted")
        before = one.status()["stats"]
        code, answer = one.call("POST", "/api/urls", {"urls": [added]})
        assert code == 200 and answer["queued"] == 1, answer  # sent; the test is in Redis

        def filtered() -> int:
            return one.status()["stats"].get("larbin/dupefilter/filtered", 0)

        one.wait_until(
            lambda: filtered() > before.get("larbin/dupefilter/filtered", 0),
            20,
            "the shared seen test did not drop the URL posted twice",
        )
        after = one.status()["stats"]
        assert after.get("larbin/dupefilter/filtered", 0) == (
            before.get("larbin/dupefilter/filtered", 0) + 1
        )
        assert after.get("larbin/frontier/enqueued") == before.get("larbin/frontier/enqueued")
        for worker in workers:
            assert worker.call("POST", "/api/stop")[0] == 200
        assert [worker.wait(60) for worker in workers] == [0, 0]
    finally:
        for worker in workers:
            worker.kill()
    fetched = [e["path"] for e in web.read_log()]
    assert fetched.count("/added-to-the-shared-frontier") == 1
