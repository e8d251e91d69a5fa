"""Waiting on a condition instead of sleeping a fixed time."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str = "the condition",
    *,
    interval: float = 0.02,
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Poll ``predicate`` until it returns a true value (returned), or fail after ``timeout`` s.

    ``pause`` waits between polls: a reactor test passes one that runs the reactor meanwhile.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        pause(interval)


def wait_stable(
    read: Callable[[], T],
    quiet: float,
    timeout: float,
    what: str = "the value",
    interval: float = 0.1,
) -> T:
    """Poll ``read`` until its value has not changed for ``quiet`` seconds; return that value."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} still changing after {timeout} s")
        time.sleep(interval)
        now = read()
        if now != value:
            value, since = now, time.monotonic()
    return value


def run_loop(seconds: float) -> None:
    """A ``pause`` for ``wait_for`` that runs the (reactor's) asyncio loop meanwhile."""
    asyncio.get_event_loop().run_until_complete(asyncio.sleep(seconds))
