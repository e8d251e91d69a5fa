"""``StartupFreeze``: the objects built at start-up are moved out of the garbage collector's way.

Replaces: nothing of Scrapy's; an extension (``EXTENSIONS``) set with the lean engine. The
modules, classes and components built before the engine starts live as long as the process, yet
the cyclic collector traverses them at every full collection and at exit. ``gc.freeze()`` at
``engine_started`` moves them to the permanent generation. Nothing that would have been freed is
kept, except a cycle that was already garbage at that moment (figures: benchmarks/RESULTS.md,
"Start-up, second pass").
Private names: none.
Retire when: Scrapy freezes after start-up itself.
Settings: ``LARBIN_GC_FREEZE``. No stat: counting the frozen objects walks them all.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = ()

logger = logging.getLogger(__name__)


class StartupFreeze:
    """Freezes the start-up objects once, at ``engine_started`` (see the module docstring)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartupFreeze:
        if not crawler.settings.getbool("LARBIN_GC_FREEZE"):
            raise NotConfigured
        ext = cls()
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        return ext

    def engine_started(self) -> None:
        gc.freeze()
        logger.debug("gc: start-up objects frozen")
