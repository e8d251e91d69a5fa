"""Pages handed out whose outlinks are still on their way to the frontier: a page is acknowledged
only once all its children reached ``enqueue_request``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable


class PendingPages:
    """Counts each page's children in and out; calls ``complete(page)`` when both are done."""

    def __init__(self, complete: Callable[[Hashable], None]) -> None:
        self._complete = complete
        self._left: dict[Hashable, int] = {}  # page -> children announced minus enqueued
        self._done: set[Hashable] = set()  # pages whose request_done arrived

    def page_done(self, page: Hashable, children: int) -> None:
        """``request_done``: the page produced ``children`` requests (some may be queued)."""
        self._done.add(page)
        self._settle(page, children)

    def child_enqueued(self, page: Hashable) -> None:
        """One child of ``page`` reached ``enqueue_request`` (queued or filtered alike)."""
        self._settle(page, -1)

    def _settle(self, page: Hashable, delta: int) -> None:
        left = self._left.pop(page, 0) + delta
        if left == 0 and page in self._done:
            self._done.discard(page)
            self._complete(page)
        else:
            self._left[page] = left

    def __len__(self) -> int:
        return len(self._done)
