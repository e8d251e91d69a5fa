"""The job directory: checked before anything is built on it, and ``spider.state`` saved safely.

``JobDirCheck`` also says what a ``JOBDIR`` holds: a crawl that closed with nothing left to do
leaves ``JOBDIR/complete`` (its end time), and running it again says "this crawl is complete" in
one line (only URLs it has not seen are fetched: new seeds, revisits). ``-O`` (overwrite the
items file) on a ``JOBDIR`` that holds a crawl is refused: the items of the pages fetched
before would be lost, and the crawl would not fetch them again. One crawl uses a ``JOBDIR`` at
a time (``JOBDIR/crawl.lock``, a POSIX lock): a second is refused in one line before it
opens anything.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import pickle
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.spiderstate import SpiderState

from larbinscrapy import fatal

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

PROBE = ".larbin-write-test"
COMPLETE = "complete"  # written when a crawl closed with nothing left to do
LOCK = "crawl.lock"  # locked by the crawl using the JOBDIR: one crawl per JOBDIR
# Files a JOBDIR holds while its crawl runs, not a crawl's state (the status page's address).
_NOT_STATE = frozenset({PROBE, LOCK, "http-address", "http-token"})


def check_writable(directory: str) -> None:
    """Create ``directory`` if needed and prove a file can be written there; ``OSError`` if not."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    probe = path / PROBE
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"x")
        os.fsync(fd)
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)


class JobDirCheck:
    """Extension: stop at once, in one line, when ``JOBDIR`` is not usable (module doc)."""

    def __init__(self, crawler: Crawler, jobdir: Path, lock: int | None = None) -> None:
        self.crawler = crawler
        self.jobdir = jobdir
        self._lock = lock  # a descriptor of JOBDIR/LOCK, locked while the crawl runs

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobDirCheck:
        jobdir = crawler.settings.get("JOBDIR")
        if not jobdir:
            raise NotConfigured  # no message: Scrapy would log it as a WARNING on every crawl
        held = holds_crawl(Path(jobdir))
        try:
            check_writable(jobdir)
            lock = take_lock(Path(jobdir))
        except OSError as exc:
            raise fatal.fail_start(
                f"JOBDIR {jobdir} cannot be used: {exc.strerror or exc} ({exc.filename or jobdir})"
            ) from None
        if lock is None:
            raise fatal.fail_start(
                f"JOBDIR {jobdir} is in use by another crawl running now: one crawl per JOBDIR "
                f"(stop that one, or give this one another JOBDIR)"
            )
        overwritten = overwritten_feeds(crawler.settings.getdict("FEEDS"))
        if held and overwritten:
            os.close(lock)
            raise fatal.fail_start(
                f"-O would empty {overwritten[0]}, but JOBDIR {jobdir} holds a crawl whose pages "
                f"are not fetched again: use -o to append to it (or another JOBDIR to crawl "
                f"afresh)"
            )
        check = cls(crawler, Path(jobdir), lock)
        check.say_complete()
        crawler.signals.connect(check.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(check.engine_stopped, signal=signals.engine_stopped)
        return check

    def engine_stopped(self) -> None:
        """The crawl is over: another may use the JOBDIR."""
        if self._lock is not None:
            os.close(self._lock)  # (the lock goes with the descriptor; the file stays)
            self._lock = None

    def say_complete(self) -> None:
        """One line when the JOBDIR holds a crawl that had nothing left to do; forget it."""
        marker = self.jobdir / COMPLETE
        try:
            ended = marker.read_text(encoding="utf-8").strip()
            marker.unlink()
        except OSError:  # no marker: a new crawl, or one to resume
            return
        logger.info(
            "larbin: this crawl is complete (JOBDIR %s, finished %s): only URLs it has "
            "not seen are fetched; another JOBDIR crawls afresh",
            self.jobdir,
            ended,
        )

    def spider_closed(self, spider: Spider, reason: str) -> None:
        stats = self.crawler.stats
        if (
            reason != "finished"
            or stats.get_value("larbin/fatal") is not None
            or stats.get_value("larbin/frontier/left_queued", 0)
        ):
            return
        marker = self.jobdir / COMPLETE
        tmp = marker.with_name(COMPLETE + ".tmp")
        try:
            tmp.write_text(
                time.strftime("%Y-%m-%d %H:%M:%S UTC\n", time.gmtime()), encoding="utf-8"
            )
            os.replace(tmp, marker)
        except OSError as exc:
            logger.warning("larbin: cannot mark %s complete: %s", self.jobdir, exc.strerror or exc)


def take_lock(jobdir: Path) -> int | None:
    """A descriptor holding ``jobdir``'s crawl lock, or None when another process holds it.

    A POSIX record lock (``lockf``): the kernel drops it when the process ends, ``kill -9``
    included, so a stale lock never needs cleaning up; and it is the process's, so crawlers
    built again in one process (a test, a ``CrawlerProcess`` running crawls in turn) share it.
    """
    fd = os.open(jobdir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def holds_crawl(jobdir: Path) -> bool:
    """Whether ``jobdir`` holds an earlier crawl's state (a file other than the page's own)."""
    try:
        return any(entry.name not in _NOT_STATE for entry in jobdir.iterdir())
    except OSError:  # missing (a new crawl) or unreadable (the writable check says so)
        return False


def overwritten_feeds(feeds: dict[str, Any]) -> list[str]:
    """The feed URIs that ``-O`` (``overwrite``) empties when the crawl starts."""
    return [
        str(uri)
        for uri, options in feeds.items()
        if isinstance(options, dict) and options.get("overwrite")
    ]


class AtomicSpiderState(SpiderState):
    """Scrapy's ``SpiderState``, written atomically and never after a fatal error."""

    crawler: Crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AtomicSpiderState:
        state = super().from_crawler(crawler)
        state.crawler = crawler
        return state

    def spider_closed(self, spider: Spider) -> None:
        if not self.jobdir or not hasattr(spider, "state"):  # never opened: nothing to save
            return
        if self.crawler.stats.get_value("larbin/fatal") is not None:
            return
        path = Path(self.statefn)
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("wb") as f:
                pickle.dump(spider.state, f, protocol=4)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            logger.error(
                "larbin: cannot save the spider state to %s: %s (the previous one is kept)",
                path,
                exc.strerror or exc,
            )
            tmp.unlink(missing_ok=True)
