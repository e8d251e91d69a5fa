"""``StartupFreeze``: long-lived objects out of the cyclic collector's way; the C heap trimmed.

Replaces: nothing of Scrapy's; an extension (``EXTENSIONS``) set with the lean engine. The
modules, classes and components built before the engine starts live as long as the process, yet
the cyclic collector traverses them at every full collection: ``gc.freeze()`` at
``engine_started`` moves them to the permanent generation (figures: benchmarks/RESULTS.md,
"Start-up, second pass"). ``LARBIN_GC_FREEZE_INTERVAL`` also collects, then freezes, every so
many seconds (off by default: a frozen cycle that dies later is never collected);
``LARBIN_GC_THRESHOLDS`` sets ``gc.set_threshold`` (50000,10,10 by default: a page leaves no
cycles, docs/running.md). ``LARBIN_MALLOC_TRIM_INTERVAL`` calls glibc's ``malloc_trim(0)`` on a
timer: the C heap keeps the pages of freed response bodies that sit between live objects.
Private names: none. Retire when: Scrapy freezes after start-up itself. Stats:
``larbin/memory/trims`` and ``trim_cpu_us`` (no count of frozen objects: it walks them all).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import time
from typing import TYPE_CHECKING, cast

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import task

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

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

    def __init__(
        self,
        interval: float = 0.0,
        thresholds: tuple[int, ...] = (),
        trim_interval: float = 0.0,
        stats: StatsCollector | None = None,
    ) -> None:
        self.interval = interval
        self.thresholds = thresholds
        self.trim_interval = trim_interval
        self.stats = stats
        self._loop: task.LoopingCall | None = None
        self._trim_loop: task.LoopingCall | None = None
        self._malloc_trim = _malloc_trim() if trim_interval > 0 else None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartupFreeze:
        s = crawler.settings
        if not s.getbool("LARBIN_GC_FREEZE"):
            raise NotConfigured
        ext = cls(
            s.getfloat("LARBIN_GC_FREEZE_INTERVAL"),
            parse_thresholds(s.get("LARBIN_GC_THRESHOLDS")),
            s.getfloat("LARBIN_MALLOC_TRIM_INTERVAL"),
            crawler.stats,
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
        if self._malloc_trim is not None:
            self._trim_loop = task.LoopingCall(self.trim)
            self._trim_loop.start(self.trim_interval, now=False)

    def refreeze(self) -> None:
        """Collect what is garbage now, then freeze the survivors."""
        gc.collect()
        gc.freeze()

    def trim(self) -> None:
        """Give the C heap's free pages back to the system (``malloc_trim``): freed response
        bodies leave holes between the objects that live on, which glibc keeps otherwise."""
        if self._malloc_trim is None:
            return
        started = time.process_time()
        self._malloc_trim(0)
        if self.stats is not None:
            self.stats.inc_value("larbin/memory/trims")
            spent = round(1e6 * (time.process_time() - started))
            self.stats.inc_value("larbin/memory/trim_cpu_us", spent)

    def engine_stopped(self) -> None:
        for loop in (self._loop, self._trim_loop):
            if loop is not None and loop.running:
                loop.stop()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` from the process's own symbols (no ``find_library``, which runs
    a subprocess), or None where the C library has none (musl, macOS)."""
    try:
        return cast("Callable[[int], int]", ctypes.CDLL(None).malloc_trim)
    except (OSError, AttributeError):
        return None
