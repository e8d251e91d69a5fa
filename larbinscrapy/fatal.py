"""Errors that end a crawl: one line that says what and where, a non-zero exit, no traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.defer import deferred_from_coro

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)
_closing: set[Any] = set()  # close requests in flight, kept referenced until they end

REDIS_UNREACHABLE = "redis_unreachable"
JOBDIR_ERROR = "jobdir_error"  # unwritable, full (ENOSPC), or a state file that cannot be read
REASONS = frozenset({REDIS_UNREACHABLE, JOBDIR_ERROR})


class FatalError(Exception):
    """A crawl that cannot start; the message was already logged in one line."""


def fail_start(message: str) -> FatalError:
    """Log ``message`` (one line) and return the exception that stops the crawler's start."""
    logger.error("larbin: %s", message)
    retrieve_task_exception()
    return FatalError(message)


def stop(crawler: Any, reason: str, message: str) -> None:
    """Log ``message`` once and close the crawl with ``reason`` (one of ``REASONS``).

    From a component's ``open`` (the engine is not running yet) the close is asked for from
    ``spider_opened``, the one place Scrapy takes a ``CloseSpider`` once every component is
    open (so each is closed in turn); later, the engine is asked to close at once.
    """
    stats = crawler.stats
    if stats.get_value("larbin/fatal") is not None:
        return
    stats.set_value("larbin/fatal", reason)
    logger.error("larbin: %s", message)
    try:
        engine = crawler.engine
    except RuntimeError:  # no engine: a component built on its own
        return
    if engine is not None and engine.running:
        d = deferred_from_coro(engine.close_spider_async(reason=reason))
        _closing.add(d)

        def closed(result: Any) -> Any:
            _closing.discard(d)
            return result

        d.addBoth(closed)
        d.addErrback(lambda f: logger.debug("Closing after %s: %s", reason, f.getErrorMessage()))
        return

    def close_when_open() -> None:
        raise CloseSpider(reason)

    crawler.signals.connect(close_when_open, signal=signals.spider_opened, weak=False)


def redis_location(server: Any) -> str:
    """``redis://host:port/db`` (or the socket path) of a Redis client, for messages."""
    kw = server.connection_pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}"
    return f"redis://{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def abandon_file(f: IO[bytes]) -> None:
    """Close ``f`` without writing what its buffer still holds (a write to it failed).

    A later flush must not put those bytes on disk after the writes that had to precede them
    failed (the journals' order is what resume trusts). The raw file is closed first: a
    buffered file whose raw file is closed closes without flushing. No descriptor is opened
    (this runs when the process may have none left: EMFILE) and nothing is raised.
    """
    if f.closed:
        return
    inner: Any = getattr(f, "buffer", f)  # a text file's binary buffer
    raw = getattr(inner, "raw", None)
    if raw is not None:
        with contextlib.suppress(OSError, ValueError):
            raw.close()
    with contextlib.suppress(OSError, ValueError):
        f.close()


def disk_stopper(crawler: Any, where: str) -> Callable[[OSError], None]:
    """What a component calls when a write under ``where`` failed: the crawl stops."""

    def stop_crawl(exc: OSError) -> None:
        stop(crawler, JOBDIR_ERROR, f"job directory {where}: {exc}")

    return stop_crawl


def redacted(url: str) -> str:
    """``url`` without its password (Redis URLs may carry one), for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def retrieve_task_exception() -> None:
    """Keep asyncio from printing a traceback for an error already logged in one line.

    Scrapy builds the spider and its components inside the crawl's asyncio task and, when that
    fails, notes it (exit code 1) and re-raises "so asyncio still logs it": as "Task exception
    was never retrieved" with a full traceback. Retrieving the exception when the task ends
    leaves our line. Outside a task (a caller building the crawler itself) nothing changes.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return
    if task is not None:
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
