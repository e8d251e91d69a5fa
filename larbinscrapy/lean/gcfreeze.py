"""``StartupFreeze``: long-lived objects moved out of the cyclic garbage collector's way.

Replaces: nothing of Scrapy's; an extension (``EXTENSIONS``) set with the lean engine. The
modules, classes and components built before the engine starts live as long as the process, yet
the cyclic collector traverses them at every full collection and at exit. ``gc.freeze()`` at
``engine_started`` moves them to the permanent generation. Nothing that would have been freed is
kept, except a cycle that was already garbage at that moment (figures: benchmarks/RESULTS.md,
"Start-up, second pass").

``LARBIN_GC_FREEZE_INTERVAL`` also collects, then freezes, every so many seconds (off by
default: a frozen cycle that dies later is never collected); ``LARBIN_GC_THRESHOLDS`` sets
``gc.set_threshold`` (50000,10,10 by default: a page leaves no cycles, docs/running.md).
Private names: none. Retire when: Scrapy freezes after start-up itself. No stat: counting the
frozen objects walks them all.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = ()

logger = logging.getLogger(__name__)
GENERATIONS = 3  # gc.set_threshold takes one threshold per generation


def parse_thresholds(value: object) -> tuple[int, ...]:
    """``LARBIN_GC_THRESHOLDS``: up to three non-negative ints ("700,10,10" or a list)."""
    if not value:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"expected up to three integers, got {value!r}")
    numbers = tuple(int(str(v).strip()) for v in items)
    if not 1 <= len(numbers) <= GENERATIONS or min(numbers) < 0:
        raise ValueError(f"expected one to three integers >= 0, got {value!r}")
    return numbers


class StartupFreeze:
    """Freezes the start-up objects at ``engine_started``, then maybe periodically (module
    docstring)."""

    def __init__(self, interval: float = 0.0, thresholds: tuple[int, ...] = ()) -> None:
        self.interval = interval
        self.thresholds = thresholds
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartupFreeze:
        s = crawler.settings
        if not s.getbool("LARBIN_GC_FREEZE"):
            raise NotConfigured
        ext = cls(
            s.getfloat("LARBIN_GC_FREEZE_INTERVAL"), parse_thresholds(s.get("LARBIN_GC_THRESHOLDS"))
        )
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def engine_started(self) -> None:
        if self.thresholds:
            gc.set_threshold(*self.thresholds)
        gc.freeze()
        logger.debug("gc: start-up objects frozen")
        if self.interval > 0:
            self._loop = task.LoopingCall(self.refreeze)
            self._loop.start(self.interval, now=False)

    def refreeze(self) -> None:
        """Collect what is garbage now, then freeze the survivors."""
        gc.collect()
        gc.freeze()

    def engine_stopped(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
