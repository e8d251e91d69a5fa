"""Pages handed out whose outlinks are still on their way to the frontier: a page is acknowledged
only once all its children reached ``enqueue_request``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable


class ItemSettlement(Protocol):
    """The item receipts (``pipelines/receipts.py``) as the frontier asks them: a page's items
    count as its parts once ``connect``ed, and ``settle`` flushes them at close."""

    def connect(self, pages: PendingPages) -> None:
        """Tell ``pages`` when each item is stored."""

    def settle(self) -> None:
        """Flush now and settle every item stored so far."""


class PendingPages:
    """Counts each page's parts in and out; calls ``complete(page)`` when both are done."""

    def __init__(self, complete: Callable[[Hashable], None]) -> None:
        self._complete = complete
        self._left: dict[Hashable, int] = {}  # page -> parts announced minus arrived
        self._done: set[Hashable] = set()  # pages whose request_done arrived

    def page_done(self, page: Hashable, parts: int) -> None:
        """``request_done``: the page produced ``parts`` (children, items; some may be in)."""
        self._done.add(page)
        self._settle(page, parts)

    def arrived(self, page: Hashable) -> None:
        """One part of ``page`` is settled: a child reached ``enqueue_request`` (queued or
        filtered alike), or an item was stored or dropped."""
        self._settle(page, -1)

    child_enqueued = arrived

    def expect(self, page: Hashable, n: int) -> None:
        """``n`` more parts of ``page`` (a pipeline holds one of its items until stored)."""
        self._settle(page, n)

    def _settle(self, page: Hashable, delta: int) -> None:
        left = self._left.pop(page, 0) + delta
        if left == 0 and page in self._done:
            self._done.discard(page)
            self._complete(page)
        else:
            self._left[page] = left

    def __len__(self) -> int:
        return len(self._done)
