"""Waiting on a condition instead of sleeping a fixed time."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float, what: str = "the condition",
             interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns a true value (returned), or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)
