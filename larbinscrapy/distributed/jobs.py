"""The ordered Redis thread of one worker: every Redis round trip, off the reactor thread.

Redis is never called in the reactor thread. Every round trip of a ``RedisScheduler`` goes
through one dedicated thread, so the jobs reach Redis in the order they were submitted (an
admit before the pop after it, a release before the next pop...); their results come back to
the reactor thread, to each job's handlers. A failed job is logged and never fails its caller,
so no error wedges the worker.

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

import hashlib
import logging
import threading
import weakref
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.log import failure_to_exc_info
from twisted.internet import defer
from twisted.python.failure import Failure

from larbinscrapy.distributed.connection import UNREACHABLE
from larbinscrapy.lean.rediscluster import pipelined
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

RECOVERED = 1.0  # seconds of answers without a failure that end an outage


def later(seconds: float) -> defer.Deferred[None]:
    """A Deferred fired ``seconds`` from now, in the reactor thread (a poll between two looks)."""
    d: defer.Deferred[None] = defer.Deferred()
    installed_reactor().callLater(seconds, d.callback, None)
    return d


def _same(reply: Any) -> Any:
    return reply


class LuaScript:
    """A Lua script and its SHA1: what ``EVALSHA`` names, loaded by ``run_calls`` on first use
    (no client needed to build one: a cluster client connects only in the Redis thread)."""

    __slots__ = ("script", "sha")

    def __init__(self, script: str) -> None:
        self.script = script
        self.sha = hashlib.sha1(script.encode()).hexdigest()  # Redis names a script by its SHA1


@dataclass(slots=True)
class Call:
    """One Redis command of a batch: its arguments, how to read its reply, and the script to
    load again when Redis forgot it (a restarted server answers ``NOSCRIPT``)."""

    args: tuple[Any, ...]
    parse: Callable[[Any], Any] = _same
    script: LuaScript | None = None

    @classmethod
    def script_call(
        cls, script: LuaScript, key: str, args: list[Any], parse: Callable[[Any], Any] = _same
    ) -> Call:
        """``EVALSHA`` of ``script`` with one key (it routes the call to the key's shard)."""
        return cls(("EVALSHA", script.sha, 1, key, *args), parse, script)


# Scripts each client has loaded: a batch never mixes loaded and unloaded scripts, so after a
# NOSCRIPT (a restarted server forgot them all) resending the failed calls keeps their order.
_LOADED: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def _load_scripts(server: Any, calls: list[Call], force: bool = False) -> None:
    loaded = _LOADED.setdefault(server, set())
    for call in calls:
        if call.script is not None and (force or call.script.sha not in loaded):
            server.script_load(call.script.script)
            loaded.add(call.script.sha)


# A slot moving or a master joining, as the client reports it outside ``UNREACHABLE``: a script
# creating a key in a slot being migrated ("non local key"), and redis-py's table of nodes
# while it learns a new master (an AttributeError on a node not yet in it). Retried as a moving
# slot is: one line an outage, counted, no traceback.
_MOVING = ("Script attempted to access a non local key", "'redis_connection'")


def _moving(exc: Exception) -> Exception:
    """``exc`` as a ``ClusterError`` when it says a slot or a node is moving, else itself."""
    if isinstance(exc, (redis.exceptions.ResponseError, AttributeError)) and any(
        m in str(exc) for m in _MOVING
    ):
        return redis.exceptions.ClusterError(f"the cluster is moving slots: {exc}")
    return exc


def run_calls(server: Any, calls: list[Call]) -> list[Any]:
    """Send ``calls`` in one pipeline; each entry is its parsed reply or its exception.

    A connection error fails the whole batch (raised). Calls that met ``NOSCRIPT`` (Redis
    restarted and forgot every script) ran nothing: the scripts are loaded again and those
    calls sent again, in order."""
    _load_scripts(server, calls)
    try:
        replies = pipelined(server, [call.args for call in calls])
    except AttributeError as exc:
        moved = _moving(exc)
        if moved is exc:
            raise
        raise moved from exc
    again = [i for i, r in enumerate(replies) if isinstance(r, redis.exceptions.NoScriptError)]
    if again:
        _load_scripts(server, [calls[i] for i in again], force=True)
        for i, r in zip(again, pipelined(server, [calls[i].args for i in again]), strict=True):
            replies[i] = r
    out: list[Any] = []
    for call, reply in zip(calls, replies, strict=True):
        if isinstance(reply, Exception):
            out.append(_moving(reply))
            continue
        try:
            out.append(call.parse(reply))
        except Exception as exc:  # a parse bug fails that job, not the batch
            out.append(exc)
    return out


def run_call(server: Any, call: Call) -> Any:
    """One call, synchronously (tests, benchmarks, the close path): its result, or raise."""
    (result,) = run_calls(server, [call])
    if isinstance(result, Exception):
        raise result
    return result


@dataclass(slots=True)
class _Job:
    fn: Callable[..., Any] | Call
    args: tuple[Any, ...]
    done: Callable[[Any], Any]  # given the result or its Failure, in the reactor thread


def _fire(d: defer.Deferred[Any], result: Any) -> None:
    d.errback(result) if isinstance(result, Failure) else d.callback(result)


class RedisJobs:
    """Runs jobs one batch at a time, in submission order, in a thread of their own."""

    def __init__(
        self,
        name: str = "larbin-redis",
        *,
        server: Any = None,
        connect: Callable[[], Any] | None = None,
        outage_timeout: float = 0.0,
        on_outage: Callable[[str], Any] | None = None,
        stats: Any = None,
    ) -> None:
        self.name = name
        self.server = server  # what ``Call`` jobs are sent to...
        self.connect = connect  # ...or what makes it, first thing in the thread
        self._queue: deque[_Job] = deque()
        self._turn: list[_Job] = []  # submitted in this reactor turn, not yet handed over
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.in_flight = 0  # submitted, result not yet applied
        self.seq = 0  # jobs submitted so far: Redis runs them in this order
        self.outage_timeout = outage_timeout  # 0: never give up
        self._on_outage = on_outage
        self._stats = stats
        self._down_since: float | None = None  # first failure of the current outage
        self._last_failure = 0.0  # its latest failure
        self._last_answer = 0.0  # when a job last came back, success or failure
        self._gave_up = False

    def start(self) -> None:
        """Start the thread; it stops at ``stop()`` or, at the latest, at reactor shutdown."""
        self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
        self._thread.start()
        installed_reactor().addSystemEventTrigger("during", "shutdown", self.stop)

    @property
    def running(self) -> bool:
        """Started and not stopped: jobs sent now are run."""
        return self._thread is not None and not self._stopped

    # -- the thread ------------------------------------------------------------------------
    def _work(self) -> None:
        reactor = installed_reactor()
        if callable(self.connect):  # a cluster client connects here, never in the reactor
            try:
                self.server = self.connect()
            except Exception as exc:  # every job fails with it; the caller reports it
                self._fail_all(reactor, exc)
                return
        while (batch := self._next_batch()) is not None:
            reactor.callFromThread(self._deliver, batch, self._run_batch(batch))

    def _fail_all(self, reactor: Any, exc: Exception) -> None:
        while (batch := self._next_batch()) is not None:
            reactor.callFromThread(self._deliver, batch, [Failure(exc)] * len(batch))

    def _next_batch(self) -> list[_Job] | None:
        """Every job queued while the thread was busy, waiting for one; None once stopped."""
        with self._cond:
            while not self._queue and not self._stopped:
                self._cond.wait()
            if not self._queue:
                return None
            batch = list(self._queue)
            self._queue.clear()
        return batch

    def _run_batch(self, batch: list[_Job]) -> list[Any]:
        """Each job's result or Failure; consecutive ``Call`` jobs share one pipeline."""
        out: list[Any] = []
        i = 0
        while i < len(batch):
            job = batch[i]
            if not isinstance(job.fn, Call):
                try:
                    out.append(job.fn(*job.args))
                except BaseException:  # handed to the job's errbacks
                    out.append(Failure())
                i += 1
                continue
            j = i
            while j < len(batch) and isinstance(batch[j].fn, Call):
                j += 1
            calls = [b.fn for b in batch[i:j] if isinstance(b.fn, Call)]
            try:
                results = run_calls(self.server, calls)
            except Exception as exc:  # the whole pipeline failed
                results = [exc] * len(calls)
            out += [Failure(r) if isinstance(r, Exception) else r for r in results]
            i = j
        return out

    def _deliver(self, batch: list[_Job], results: list[Any]) -> None:
        for job, result in zip(batch, results, strict=True):
            job.done(result)

    # -- the reactor side ------------------------------------------------------------------
    def run(self, fn: Callable[..., Any] | Call, *args: Any) -> defer.Deferred[Any]:
        """Run ``fn(*args)`` (or send the call) after the jobs before it; the Deferred fails
        if it raises."""
        if self._stopped:  # the thread is gone: fail now rather than never
            return defer.fail(redis.ConnectionError(f"{self.name} has stopped"))
        d: defer.Deferred[Any] = defer.Deferred()
        self._queue_job(_Job(fn, args, partial(_fire, d)))
        return d

    def _queue_job(self, job: _Job) -> None:
        self._turn.append(job)
        if len(self._turn) == 1:  # the thread gets this reactor turn's jobs at its end
            installed_reactor().callLater(0, self._hand_over)

    def _hand_over(self) -> None:
        """One wake-up of the thread for every job of a reactor turn: they share a pipeline
        (a thread woken at the first job would send it alone, then the rest)."""
        with self._cond:
            self._queue.extend(self._turn)
            self._cond.notify()
        self._turn.clear()

    def submit(
        self,
        what: str,
        fn: Callable[..., Any] | Call,
        *args: Any,
        then: Callable[[Any], Any] | None = None,
        always: Callable[[], Any] | None = None,
        failed: Callable[[], Any] | None = None,
        waiter: defer.Deferred[Any] | None = None,
    ) -> None:
        """Run ``fn(*args)`` (Redis round trips), or send the ``Call``, after every job
        submitted before it; then, in the reactor thread, ``always()``, ``then(result)`` on
        success, or ``failed()`` after logging the error (``then`` raising counts as a
        failure). No Deferred a job: a worker submits several a page."""
        if self._stopped:
            logger.warning("Redis %s after the scheduler closed: not sent", what)
            if waiter is not None:
                waiter.callback(None)
            return
        if not self.in_flight:
            self._last_answer = self._now()  # "no answer for N s" counts from here
        self.in_flight += 1
        self.seq += 1
        self._queue_job(_Job(fn, args, partial(self._settle, what, then, always, failed, waiter)))

    def submit_awaited(
        self, what: str, fn: Callable[..., Any] | Call, *args: Any, **how: Any
    ) -> defer.Deferred[Any]:
        """``submit``, and a Deferred fired once the handlers ran: with the result (what
        ``then`` returned, if given), or None when the job failed. It never fails."""
        waiter: defer.Deferred[Any] = defer.Deferred()
        self.submit(what, fn, *args, waiter=waiter, **how)
        return waiter

    def _settle(
        self,
        what: str,
        then: Callable[[Any], Any] | None,
        always: Callable[[], Any] | None,
        failed: Callable[[], Any] | None,
        waiter: defer.Deferred[Any] | None,
        result: Any,
    ) -> None:
        """A job's result, in the reactor thread: its handlers, its failure logged."""
        try:
            self._finish(result, always)
            if not isinstance(result, Failure) and then is not None:
                result = then(result)
        except Exception:
            result = Failure()
        if isinstance(result, Failure):
            try:
                self._failed(result, what, failed)
            except Exception:
                logger.exception("Handling a failed Redis %s failed", what)
            result = None
        if waiter is not None:
            waiter.callback(result)

    def _finish(self, result: Any, always: Callable[[], Any] | None) -> None:
        """A job is over: its answer ends an outage once jobs succeed for ``RECOVERED`` s."""
        self.in_flight -= 1
        self._last_answer = self._now()
        # in a cluster the masters still up keep answering while one is down: one outage
        if (
            not isinstance(result, Failure)
            and self._down_since is not None
            and self._now() - self._last_failure >= RECOVERED
        ):
            logger.info("Redis answers again after %.1f s", self._now() - self._down_since)
            self._down_since = None
        if always is not None:
            always()

    def _failed(self, failure: Failure, what: str, failed: Callable[[], Any] | None) -> None:
        if failure.check(*UNREACHABLE):
            self._redis_down(what, failure.getErrorMessage())
        else:  # a bug, not an outage: with its stack
            logger.error(
                "Redis %s failed: %s",
                what,
                failure.getErrorMessage(),
                exc_info=failure_to_exc_info(failure),
            )
        if failed is not None:
            failed()

    def _now(self) -> float:
        return installed_reactor().seconds()

    def _redis_down(self, what: str, message: str) -> None:
        """A job failed because Redis is gone or slow: one line per outage, then counts."""
        now = self._now()
        if self._stats is not None:
            self._stats.inc_value("larbin/redis/failed")
        self._last_failure = now
        if self._down_since is None:
            self._down_since = now
            logger.error(
                "Redis %s failed: %s (counted in larbin/redis/failed until Redis answers again)",
                what,
                message,
            )
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
        """Stop the thread once the jobs queued are done (idempotent); later jobs are logged
        and not sent."""
        if not self._stopped:
            self._hand_over()  # the jobs of this turn are queued before the stop
            with self._cond:
                self._stopped = True
                self._cond.notify()
