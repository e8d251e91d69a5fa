"""The ordered Redis thread of one worker: every Redis round trip, off the reactor thread.

Redis is never called in the reactor thread. Every round trip of a ``RedisScheduler`` goes
through one dedicated thread (a ``ThreadPool(1, 1)``), so the jobs reach Redis in the order
they were submitted (an admit before the pop after it, a release before the next pop...); their
results come back to the reactor thread through Deferred callbacks. A failed job is logged and
never fails the caller's Deferred, so no error wedges the worker.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.log import failure_to_exc_info
from twisted.internet import defer
from twisted.python.threadpool import ThreadPool

from larbinscrapy.reactor import defer_to_pool, installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

_REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class RedisJobs:
    """Runs jobs one at a time, in submission order, in a thread of their own."""

    def __init__(self, name: str = "larbin-redis") -> None:
        self._pool = ThreadPool(1, 1, name=name)
        self._stopped = False
        self.in_flight = 0  # submitted, result not yet applied
        self.seq = 0  # jobs submitted so far: Redis runs them in this order

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
        self.in_flight += 1
        self.seq += 1
        d = self.run(fn, *args)

        def finish(result: Any) -> Any:
            self.in_flight -= 1
            if always is not None:
                always()
            return result

        def log(failure: Failure) -> None:
            # Redis gone or slow is a fact, not a bug: one line; anything else with its stack
            trace = None if failure.check(*_REDIS_DOWN) else failure_to_exc_info(failure)
            logger.error("Redis %s failed: %s", what, failure.getErrorMessage(), exc_info=trace)
            if failed is not None:
                failed()

        d.addBoth(finish)
        if then is not None:
            d.addCallback(then)
        d.addErrback(log)
        d.addErrback(lambda f: logger.error("Handling a failed Redis %s failed", what,
                                            exc_info=failure_to_exc_info(f)))
        return d

    def stop(self) -> None:
        """Stop the thread (idempotent); jobs submitted later are logged and not sent."""
        if not self._stopped:
            self._stopped = True
            if self._pool.started:
                self._pool.stop()
