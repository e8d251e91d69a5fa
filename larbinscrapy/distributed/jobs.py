"""The ordered Redis thread of one worker: every Redis round trip, off the reactor thread.

Redis is never called in the reactor thread. Every round trip of a ``RedisScheduler`` goes
through one dedicated thread (a ``ThreadPool(1, 1)``), so the jobs reach Redis in the order
they were submitted (an admit before the pop after it, a release before the next pop...); their
results come back to the reactor thread through Deferred callbacks. A failed job is logged and
never fails the caller's Deferred, so no error wedges the worker.

Redis going away is an outage, not one error per job: its first failed job is logged, the rest
are counted (``larbin/redis/failed``) until a job succeeds again ("Redis answers again" is
logged). An outage that lasts ``outage_timeout`` seconds (``LARBIN_REDIS_OUTAGE_TIMEOUT``),
or jobs that get no answer at all for that long, is handed to ``on_outage`` once: the worker
stops (everything it had leased stays in Redis and comes back to the next run's workers).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.log import failure_to_exc_info
from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from larbinscrapy.reactor import defer_to_pool, installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

_REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class RedisJobs:
    """Runs jobs one at a time, in submission order, in a thread of their own."""

    def __init__(
        self,
        name: str = "larbin-redis",
        *,
        outage_timeout: float = 0.0,
        on_outage: Callable[[str], Any] | None = None,
        stats: Any = None,
    ) -> None:
        self._pool = ThreadPool(1, 1, name=name)
        self._stopped = False
        self.in_flight = 0  # submitted, result not yet applied
        self.seq = 0  # jobs submitted so far: Redis runs them in this order
        self.outage_timeout = outage_timeout  # 0: never give up
        self._on_outage = on_outage
        self._stats = stats
        self._down_since: float | None = None  # first failure of the current outage
        self._last_answer = 0.0  # when a job last came back, success or failure
        self._gave_up = False

    def start(self) -> None:
        """Start the thread; it stops at ``stop()`` or, at the latest, at reactor shutdown."""
        self._pool.start()
        installed_reactor().addSystemEventTrigger("during", "shutdown", self.stop)

    def run(self, fn: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        """Run ``fn(*args)`` after the jobs before it; the Deferred fails if ``fn`` raises."""
        return defer_to_pool(self._pool, fn, *args)

    def submit(
        self,
        what: str,
        fn: Callable[..., Any],
        *args: Any,
        then: Callable[[Any], Any] | None = None,
        always: Callable[[], Any] | None = None,
        failed: Callable[[], Any] | None = None,
    ) -> defer.Deferred[Any]:
        """Run ``fn(*args)`` (Redis round trips) after every job submitted before it; then, in
        the reactor thread, ``always()``, ``then(result)`` on success, or ``failed()`` after
        logging the error. The returned Deferred never fails."""
        if self._stopped:
            logger.warning("Redis %s after the scheduler closed: not sent", what)
            return defer.succeed(None)
        if not self.in_flight:
            self._last_answer = self._now()  # "no answer for N s" counts from here
        self.in_flight += 1
        self.seq += 1
        d = self.run(fn, *args)

        def finish(result: Any) -> Any:
            self.in_flight -= 1
            self._last_answer = self._now()
            if not isinstance(result, Failure) and self._down_since is not None:
                logger.info("Redis answers again after %.1f s", self._now() - self._down_since)
                self._down_since = None
            if always is not None:
                always()
            return result

        def log(failure: Failure) -> None:
            if failure.check(*_REDIS_DOWN):
                self._redis_down(what, failure.getErrorMessage())
            else:  # a bug, not an outage: with its stack
                logger.error("Redis %s failed: %s", what, failure.getErrorMessage(),
                             exc_info=failure_to_exc_info(failure))
            if failed is not None:
                failed()

        d.addBoth(finish)
        if then is not None:
            d.addCallback(then)
        d.addErrback(log)
        d.addErrback(lambda f: logger.error("Handling a failed Redis %s failed", what,
                                            exc_info=failure_to_exc_info(f)))
        return d

    def _now(self) -> float:
        return installed_reactor().seconds()

    def _redis_down(self, what: str, message: str) -> None:
        """A job failed because Redis is gone or slow: one line per outage, then counts."""
        now = self._now()
        if self._stats is not None:
            self._stats.inc_value("larbin/redis/failed")
        if self._down_since is None:
            self._down_since = now
            logger.error("Redis %s failed: %s (counted in larbin/redis/failed until Redis "
                         "answers again)", what, message)
        if self.outage_timeout > 0 and now - self._down_since >= self.outage_timeout:
            self._give_up(f"unreachable for {now - self._down_since:.0f} s ({message})")

    def check(self) -> None:
        """Called on a timer: jobs in flight with no answer for ``outage_timeout`` is an outage
        too (a Redis that accepts nothing and refuses nothing never fails a job)."""
        if self.outage_timeout > 0 and self.in_flight:
            silent = self._now() - self._last_answer
            if silent >= self.outage_timeout:
                self._give_up(f"unreachable for {silent:.0f} s (no answer)")

    def _give_up(self, detail: str) -> None:
        if not self._gave_up and self._on_outage is not None:
            self._gave_up = True
            self._on_outage(detail)

    def stop(self) -> None:
        """Stop the thread (idempotent); jobs submitted later are logged and not sent."""
        if not self._stopped:
            self._stopped = True
            if self._pool.started:
                self._pool.stop()
