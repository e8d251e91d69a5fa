"""An idle worker does not poll Redis hard (issue 33: a worker's fixed cost).

A keep-alive worker on an empty frontier waits for work: what it sends Redis meanwhile is
counted by a real ``redis-server`` (``INFO commandstats``), not by the worker.
"""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING

import pytest
import redis

from larbinscrapy.distributed.jobs import RedisJobs
from larbinscrapy.distributed.membership import TickPace
from larbinscrapy.distributed.readiness import IDLE_POLL_MAX, ShardClock
from tests.support.wait import wait_for
from tests.support.workers import assert_clean_logs, start_worker, wait_workers
from testweb.harness import pages

if TYPE_CHECKING:
    from twisted.python.failure import Failure

# commands as INFO commandstats counts them: those a Lua script runs too (a pop of an empty
# shard ~15, a tick ~6, each every 2 s when idle); before the idle back-off: 74 a second
IDLE_COMMANDS_PER_S_MAX = 15.0


def _calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_ping"))


@pytest.mark.crawl
def test_an_idle_worker_sends_few_commands_a_second(web, tmp_path, redis_url):
    """Once its only page is fetched, a keep-alive worker waits; over 5 s it sends at most
    ``IDLE_COMMANDS_PER_S_MAX`` commands a second, and still picks up a seed pushed later."""
    client = redis.Redis.from_url(redis_url)
    first, later = web.url("h03.test"), web.url("h04.test")
    start = len(web.read_log())
    # the default lease timeout: a heartbeat every 2 s is enough
    worker = start_worker(
        web,
        tmp_path / "idle",
        redis_url,
        "-a",
        f"urls={first}",
        DOWNLOAD_DELAY=0,
        LARBIN_DEPTH=0,
        LARBIN_REDIS_KEEP_ALIVE=True,
        LARBIN_REDIS_LEASE_TIMEOUT=60,
    )
    try:
        wait_for(
            lambda: first in pages(web.read_log()[start:], web.port), 30, "the first seed fetched"
        )
        time.sleep(3)  # past the page's own release, admit and the idle back-off's ramp
        calls0, t0 = _calls(client), time.monotonic()
        time.sleep(5)
        rate = (_calls(client) - calls0) / (time.monotonic() - t0)
        assert rate <= IDLE_COMMANDS_PER_S_MAX, f"an idle worker sends {rate:.1f} commands/s"
        client.lpush("larbin:start_urls", later)
        wait_for(
            lambda: later in pages(web.read_log()[start:], web.port),
            30,
            "a seed pushed to Redis later crawled",
        )
    finally:
        worker.send_signal(signal.SIGINT)
        wait_workers([worker], timeout=60)
    assert worker.returncode == 0
    assert_clean_logs([worker])


def test_an_empty_shard_is_asked_ever_less_often_until_something_changes() -> None:
    """``ShardClock.nothing``: POLL, then doubled for each empty pop in a row, at most
    ``IDLE_POLL_MAX``; anything that may make an IP ready ends the back-off."""
    clock = ShardClock(2)
    waits = [clock.nothing(0, 100.0, 0.25) for _ in range(6)]
    assert waits == [0.25, 0.5, 1.0, 2.0, IDLE_POLL_MAX, IDLE_POLL_MAX]
    assert not clock.idle(100.0)  # shard 1 was never found empty
    clock.nothing(1, 100.0, 0.25)
    assert clock.idle(100.0) and not clock.idle(102.0)  # past every shard's wait: ask again
    clock.sooner(0, 100.5)  # a release: that shard's back-off ends
    assert clock.nothing(0, 101.0, 0.25) == 0.25
    clock.nothing(0, 101.0, 0.25)
    clock.leased(0)
    assert clock.nothing(0, 101.0, 0.25) == 0.25
    clock.all_now()  # new records admitted
    assert clock.next == [0.0, 0.0] and clock.empty == [0, 0]


def test_a_job_sent_after_the_redis_thread_stopped_fails_at_once() -> None:
    """A job sent once the thread stopped (a late caller at close) gets an error, not a
    Deferred that never fires."""
    jobs = RedisJobs("larbin-test", server=None)
    jobs.stop()
    failures: list[Failure] = []
    jobs.run(lambda: None).addErrback(failures.append)
    assert failures and failures[0].check(redis.ConnectionError)
    assert not jobs.running


def test_an_idle_tick_sends_its_job_ever_less_often_and_the_heartbeat_in_time() -> None:
    """``TickPace``: every tick while working; idle, after 1, 2, 4, then every 8 ticks (2 s), at
    most a quarter of the lease timeout apart; the heartbeat once a second at most."""
    pace = TickPace(lease_timeout=60)
    sent = []
    for _ in range(40):
        pace.ticks += 1
        if pace.due(idle=pace.ticks > 4):
            sent.append(pace.ticks)
    assert sent == [1, 2, 3, 4, 5, 7, 11, 19, 27, 35]
    pace.ticks += 1
    assert pace.due(idle=False) and pace.beat()  # work again: every tick
    short = TickPace(lease_timeout=3)  # a quarter of 3 s: 3 ticks at most apart
    assert short.gap_max == 3 and short.beat_every == 3
