"""Distributed mode (issue 33, point 4): pause, resume and stop every worker of the crawl from
any worker's API; ``/api/status`` fresh from its first answer; the stop message true in Redis
mode. Real ``redis-server``, real worker processes, the test web's own log as the witness."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
import redis

from tests.support.cluster import redis_cluster
from tests.support.status import LiveCrawl, port_range
from tests.support.wait import wait_stable

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

DISTRIBUTED = {"SCRAPY_SETTINGS_MODULE": "settings.distributed"}
COUNT = "larbin:frontier:count"  # the frontier's counters (LARBIN_REDIS_FRONTIER_KEY's default)


def worker_settings(redis_url: str, **more: Any) -> dict[str, Any]:
    return {
        "REDIS_URL": redis_url,
        "DOWNLOAD_DELAY": 0.5,
        "LARBIN_REDIS_KEEP_ALIVE": True,  # a paused crawl must not end as idle meanwhile
        "LARBIN_REDIS_LEASE_TIMEOUT": 4,
        "LARBIN_STATUS_PORT": port_range(10),
        **more,
    }


def pages(worker: LiveCrawl) -> int:
    return int(worker.status()["pages"])


def items_of(worker: LiveCrawl) -> list[dict[str, Any]]:
    path = worker.out / "items.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts(redis_url: str) -> tuple[int, int]:
    """(queued, leased) records of the shared frontier."""
    client = redis.Redis.from_url(redis_url)
    try:
        queued, leased = client.hmget(COUNT, "queued", "leased")
    finally:
        client.close()
    return int(queued or 0), int(leased or 0)


def test_pause_resume_stop_all_workers_from_one(
    web: RunningWeb, tmp_path: Path, redis_url: str
) -> None:
    settings = worker_settings(redis_url)
    workers: list[LiveCrawl] = []
    try:
        for name in ("w1", "w2"):
            workers.append(LiveCrawl(web, tmp_path / name, settings=settings, env=DISTRIBUTED))
        one, two = workers
        for worker in workers:
            worker.wait_until(lambda w=worker: pages(w) >= 3, 60, "a worker did not fetch")

        # Paused through worker 1's API: worker 2 pauses too, and nothing reaches the web.
        code, answer = one.call("POST", "/api/pause-all")
        assert code == 200 and answer["paused"] is True and answer["all_workers"] == "pause"
        two.wait_until(lambda: two.status()["paused"] is True, 20, "worker 2 did not pause")
        assert two.status()["all_workers"] == "pause"
        assert one.status()["paused"] is True
        wait_stable(lambda: len(web.read_log()), 3.0, 30, "requests reaching the web while paused")
        paused_at = [pages(w) for w in workers]

        # Resumed through worker 2's: both fetch again.
        code, answer = two.call("POST", "/api/resume-all")
        assert code == 200 and answer["paused"] is False and answer["all_workers"] == "resume"
        for worker, before in zip(workers, paused_at, strict=True):
            worker.wait_until(
                lambda w=worker, n=before: pages(w) > n, 30, "a worker did not fetch after resume"
            )
        assert [w.status()["paused"] for w in workers] == [False, False]

        # Stopped through worker 2's: both exit cleanly, with their items, the queue kept.
        code, answer = two.call("POST", "/api/stop-all")
        assert code == 200 and answer["stopping"] is True and answer["all_workers"] == "stop"
        assert [w.wait(60) for w in workers] == [0, 0]
        for worker in workers:
            assert items_of(worker), "a stopped worker's items are missing"
            log = worker.log()
            assert "Traceback" not in log, log[-3000:]
            stops = [line for line in log.splitlines() if "Stop requested" in line]
            assert len(stops) == 1 and "for every worker" in stops[0], stops
            assert "stays in Redis" in stops[0], stops
        queued, leased = counts(redis_url)
        assert queued > 0 and leased == 0, (queued, leased)

        # The same command starts the crawl again: an old stop does not stop a new worker.
        fetched = len(web.read_log())
        again = LiveCrawl(web, tmp_path / "again", settings=settings, env=DISTRIBUTED)
        workers.append(again)
        again.wait_until(lambda: pages(again) >= 3, 60, "the restarted worker did not fetch")
        assert again.status()["paused"] is False and again.status()["stopping"] is False
        assert len(web.read_log()) > fetched
        assert again.call("POST", "/api/stop")[0] == 200
        assert again.wait(60) == 0
    finally:
        for worker in workers:
            worker.kill()


def test_first_status_answer_is_fresh(web: RunningWeb, tmp_path: Path, redis_url: str) -> None:
    """The first ``/api/status`` of a worker that joins a running crawl already shows the
    shared frontier as Redis holds it (both workers), not a half-empty view."""
    settings = worker_settings(redis_url)
    workers: list[LiveCrawl] = []
    try:
        workers.append(LiveCrawl(web, tmp_path / "w1", settings=settings, env=DISTRIBUTED))
        one = workers[0]
        one.wait_until(lambda: pages(one) >= 3, 60, "worker 1 did not fetch")
        workers.append(LiveCrawl(web, tmp_path / "w2", settings=settings, env=DISTRIBUTED))
        first = workers[1].status()  # the very first answer of worker 2
        shared = first["frontier"]["shared"]
        assert shared.get("workers") == 2, shared
        assert {"queued", "leased", "seeds"} <= set(shared), shared
        assert shared["queued"] + shared["leased"] > 0, shared
        for worker in workers:
            assert worker.call("POST", "/api/stop")[0] == 200
        assert [w.wait(60) for w in workers] == [0, 0]
    finally:
        for worker in workers:
            worker.kill()


def test_stop_message_says_the_queue_stays_in_redis(
    web: RunningWeb, tmp_path: Path, redis_url: str
) -> None:
    """In Redis mode the queue is not in JOBDIR: the stop says where it is and how to go on."""
    worker = LiveCrawl(web, tmp_path / "w1", settings=worker_settings(redis_url), env=DISTRIBUTED)
    try:
        worker.wait_until(lambda: pages(worker) >= 3, 60, "the worker did not fetch")
        assert worker.call("POST", "/api/stop")[0] == 200
        assert worker.wait(60) == 0
        lines = [line for line in worker.log().splitlines() if "Stop requested" in line]
        assert len(lines) == 1, lines
        line = lines[0]
        assert "JOBDIR" not in line, line
        assert "stays in Redis" in line and "larbin:frontier" in line, line
        assert "REDIS_URL" in line and "LARBIN_REDIS_FRONTIER_KEY" in line, line
    finally:
        worker.kill()
    queued, leased = counts(redis_url)
    assert queued > 0 and leased == 0, (queued, leased)


@pytest.mark.cluster
def test_pause_and_stop_all_workers_on_a_cluster(web: RunningWeb, tmp_path: Path) -> None:
    """The same on a 3-master Redis Cluster: the command's hash lives in one slot, the
    heartbeat that reads it goes to every master."""
    with redis_cluster(tmp_path / "cluster") as cluster:
        url = f"redis://127.0.0.1:{cluster.ports[1]}/0"  # any node
        settings = worker_settings(url, LARBIN_REDIS_CLUSTER=True, LARBIN_REDIS_SHARDS=12)
        workers: list[LiveCrawl] = []
        try:
            for name in ("w1", "w2"):
                workers.append(LiveCrawl(web, tmp_path / name, settings=settings, env=DISTRIBUTED))
            one, two = workers
            for worker in workers:
                worker.wait_until(lambda w=worker: pages(w) >= 3, 60, "a worker did not fetch")
            assert one.call("POST", "/api/pause-all")[0] == 200
            two.wait_until(lambda: two.status()["paused"] is True, 20, "worker 2 did not pause")
            wait_stable(lambda: len(web.read_log()), 3.0, 30, "requests reaching the web")
            code, answer = two.call("POST", "/api/stop-all")
            assert code == 200 and answer["stopping"] is True
            assert [w.wait(60) for w in workers] == [0, 0]
            for worker in workers:
                assert "Traceback" not in worker.log()
        finally:
            for worker in workers:
                worker.kill()
