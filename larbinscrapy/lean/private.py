"""The private Scrapy and Twisted names larbinscrapy's own stages need, here and nowhere else.

Replaces: nothing; the frontier and the failure classifier get these names from this module,
so that every private name the project uses sits behind the ``lean/`` wall and its start-up
check (``check``: one warning naming what changed, and the fallback each one then takes).
Private names: ``ExecutionEngine._slot`` (its ``nextcall``: how the engine's own ``crawl()``
wakes itself), ``twisted.web._newclient.ResponseFailed``, ``twisted.web.http._DataLoss``.
Retire when: Scrapy lets a scheduler say "I have work again" through a public call,
and Scrapy's download errors carry the reason of a failed answer without Twisted's classes.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from larbinscrapy.lean.crawlcommand import REQUIRES as COMMAND_REQUIRES
from larbinscrapy.lean.requires import Private, problems

logger = logging.getLogger(__name__)

REQUIRES: tuple[Private, ...] = (
    ("scrapy.core.engine", "_Slot.__init__", "02abeba84731"),  # it sets .nextcall
    ("twisted.web._newclient", "ResponseFailed"),
    ("twisted.web.http", "_DataLoss"),
)


class _NeverRaised(Exception):
    """Stands in for a Twisted class that is gone: an ``isinstance`` test that never matches."""


def _class(module: str, name: str) -> type[BaseException]:
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return _NeverRaised
    return found if isinstance(found, type) and issubclass(found, BaseException) else _NeverRaised


RESPONSE_FAILED = _class("twisted.web._newclient", "ResponseFailed")  # a broken answer's reasons
DATA_LOSS = _class("twisted.web.http", "_DataLoss")  # a body cut short


def wake_engine(engine: Any) -> None:
    """Ask the engine for its next requests now (what its own ``crawl()`` does after an
    enqueue); without the private slot, its 5-second heartbeat does it later."""
    slot = getattr(engine, "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def check(requires: tuple[Private, ...] = REQUIRES + COMMAND_REQUIRES) -> list[str]:
    """One warning when a private name changed in the installed Scrapy/Twisted; its problems."""
    found = problems(requires)
    if found:
        logger.warning(
            "larbinscrapy: private Scrapy/Twisted names changed (%s): the frontier then waits for "
            "the engine's heartbeat, failed answers count as malformed and `scrapy crawl` exits 0 "
            "after a fatal error",
            "; ".join(found),
        )
    return found
