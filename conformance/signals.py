"""Scrapy's module-level sends as ``LeanSignalManager`` makes them, for Scrapy's tests of them.

``tests/test_utils_signal.py`` of Scrapy's sdist calls ``scrapy.utils.signal.send_catch_log`` and
``send_catch_log_async`` with pydispatch's default sender; a crawl sends through the crawler's
manager (``crawler.signals``), which is ours (``larbinscrapy/lean/signals.py``). These two route
the tests' calls through it, sender included.
"""

from __future__ import annotations

from typing import Any

from pydispatch.dispatcher import Anonymous

from larbinscrapy.lean.signals import LeanSignalManager


def send_catch_log(signal: Any, sender: Any = Anonymous, **named: Any) -> list[tuple[Any, Any]]:
    return LeanSignalManager(sender).send_catch_log(signal, **named)


async def send_catch_log_async(
    signal: Any, sender: Any = Anonymous, **named: Any
) -> list[tuple[Any, Any]]:
    return await LeanSignalManager(sender).send_catch_log_async(signal, **named)
