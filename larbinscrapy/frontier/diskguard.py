"""A frontier that cannot write its files any more stops writing at once, and stops the crawl."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class Guarded(Protocol):
    """What ``writes`` needs of the class whose methods it wraps."""

    disk_error: BaseException | None
    closed: bool

    def _disk_failed(self, exc: BaseException) -> None: ...


def writes(default: Any) -> Callable[[_F], _F]:
    """Decorate a method that may write the frontier's files (module docstring)."""

    def wrap(method: _F) -> _F:
        @functools.wraps(method)
        def guarded(self: Guarded, *args: Any, **kwargs: Any) -> Any:
            if self.disk_error is not None or self.closed:  # (closed: its files are)
                return default
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                self._disk_failed(exc)
                return default

        return guarded  # type: ignore[return-value]

    return wrap
