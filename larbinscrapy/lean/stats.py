"""Scrapy's in-memory stats collector without a wrapper around every attribute read.

Replaces: ``MemoryStatsCollector`` (``STATS_CLASS``). Scrapy 2.19's
``StatsCollector.__getattribute__`` wraps ``inc_value`` and the other methods in a check that
warns when a caller still passes the deprecated ``spider`` argument, and every attribute read
goes through it. This class is ``MemoryStatsCollector`` with Python's own attribute lookup:
same stats, ``spider_stats`` after close, the dump at the end; ``spider=`` still works, unwarned.
The cost is in the lookup itself, so ``object.__getattribute__`` back on our subclass is the one
way to undo it (docs/modules.md, lean/).
Private names: ``StatsCollector.__getattribute__`` (its source checked: a new duty added there
turns this class off).
Retire when: Scrapy drops the ``spider`` argument (the wrapper goes with it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.statscollectors import MemoryStatsCollector

if TYPE_CHECKING:
    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    ("scrapy.statscollectors", "StatsCollector.__getattribute__", "a21e390ac403"),
)

logger = logging.getLogger(__name__)


class LeanStatsCollector(MemoryStatsCollector):
    """``MemoryStatsCollector`` with plain attribute access (see the module docstring)."""

    __getattribute__ = object.__getattribute__
