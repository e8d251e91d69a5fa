"""Turns for requests sent around the frontier (sitemap files): one per IP, a few in all.

A request the sitemap reader hands to ``engine.download_async`` takes one of the downloader's
``CONCURRENT_REQUESTS`` slots at once, and then waits there for its IP's connection at the
politeness gate. On a shared-hosting address every site's sitemap was asked for as soon as its
robots.txt was read, so dozens of them sat in the downloader waiting for one busy IP while the
frontier, with ready IPs elsewhere, got no slot (measured: 58 of 128 slots, issue 35). Here such
requests wait their turn before they reach the downloader: one at a time per IP, ``most`` in all.
"""

from __future__ import annotations

from collections import deque
from functools import partial
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from collections.abc import Callable


class Turns:
    """At most ``most`` holders in all and one per key (an IP); the others wait, per key in
    arrival order, keys in the order they became ready.

    A waiter is a function called when its turn comes (``call``): a site waiting for its first
    sitemap file costs that function's few bytes, not a coroutine and its frames (thousands of
    sites wait behind busy IPs in a broad crawl). Turns come from a loop that is never entered
    twice, so a holder that gives its turn back at once does not call the next one from
    inside itself."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self.running = 0
        self._active: set[str] = set()  # keys with a holder
        self._queues: dict[str, deque[Callable[[], object]]] = {}  # keys with a holder or waiter
        self._ready: deque[str] = deque()  # free keys whose first waiter waits for room
        self._handing = False  # in the loop that hands turns out

    def call(self, key: str, then: Callable[[], object]) -> None:
        """Call ``then`` once the caller holds a turn for ``key`` (now if it may go);
        ``give(key)`` ends it."""
        queue = self._queues.setdefault(key, deque())
        if key not in self._active and not queue and self.running < self.most:
            self._active.add(key)
            self.running += 1
            then()
            return
        queue.append(then)
        if key not in self._active and len(queue) == 1:
            self._ready.append(key)

    def take(self, key: str) -> Deferred[None]:
        """Fires when the caller holds a turn for ``key``; ``give(key)`` ends it."""
        d: Deferred[None] = Deferred()
        self.call(key, partial(d.callback, None))
        return d

    def give(self, key: str) -> None:
        """The holder of ``key`` is done: the next waiter that may go goes."""
        self._active.discard(key)
        self.running -= 1
        if self._queues.get(key):
            self._ready.append(key)
        else:
            self._queues.pop(key, None)
        if self._handing:  # the loop below, further up the stack, hands it out
            return
        self._handing = True
        try:
            while self.running < self.most and self._ready:
                ready = self._ready.popleft()
                self._active.add(ready)
                self.running += 1
                self._queues[ready].popleft()()
        finally:
            self._handing = False

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())
