"""The job directory: checked before anything is built on it, and ``spider.state`` saved safely."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.extensions.spiderstate import SpiderState

from larbinscrapy import fatal

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

PROBE = ".larbin-write-test"


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

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobDirCheck:
        jobdir = crawler.settings.get("JOBDIR")
        if not jobdir:
            raise NotConfigured  # no message: Scrapy would log it as a WARNING on every crawl
        try:
            check_writable(jobdir)
        except OSError as exc:
            raise fatal.fail_start(
                f"JOBDIR {jobdir} cannot be used: {exc.strerror or exc} ({exc.filename or jobdir})"
            ) from None
        return cls()


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
            logger.error("larbin: cannot save the spider state to %s: %s (the previous one is "
                         "kept)", path, exc.strerror or exc)
            tmp.unlink(missing_ok=True)
