"""Turns for requests sent around the frontier (sitemap files): a few per IP, a few in all.

A request the sitemap reader hands to ``engine.download_async`` takes one of the downloader's
``CONCURRENT_REQUESTS`` slots at once, and then waits there for its IP's connection at the
politeness gate. On a shared-hosting address every site's sitemap was asked for as soon as its
robots.txt was read, so dozens of them sat in the downloader waiting for one busy IP while the
frontier, with ready IPs elsewhere, got no slot (measured: 58 of 128 slots, issue 35). Here such
requests wait their turn before they reach the downloader: as many at a time per IP as it has
connections (``LARBIN_IP_CONNECTIONS``, one by default), ``most`` in all.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.internet.defer import Deferred

# a waiter: a tuple whose first item is the function called with the tuple when its turn comes
Waiter = tuple[Any, ...]


def _fire(waiter: Waiter) -> None:
    waiter[1].callback(None)


class Turns:
    """At most ``most`` holders in all and ``per_key`` per key (an IP); the others wait, per
    key in arrival order, keys in the order they became ready. A waiter is a tuple, ``(function,
    data...)``, and ``function(waiter)`` is called when its turn comes (``call``): a site
    waiting for its first sitemap file costs one tuple of strings, not a coroutine and its
    frames, nor a function object of its own (hundreds of thousands of sites wait behind busy
    IPs in a broad crawl of one page a host). A key with one waiter keeps it as is, a deque
    only from the second. Turns come from a loop that is never entered twice, so a holder that
    gives its turn back at once does not call the next one from inside itself."""

    def __init__(self, most: int, per_key: int = 1) -> None:
        self.most = max(1, most)
        self.per_key = max(1, per_key)
        self.running = 0
        self._active: dict[str, int] = {}  # keys with a holder: how many
        self._queues: dict[str, Waiter | deque[Waiter]] = {}  # keys with waiters
        self._ready: deque[str] = deque()  # keys with room whose first waiter waits for room
        self._in_ready: set[str] = set()  # the keys in ``_ready``, each once
        self._handing = False  # in the loop that hands turns out

    def call(self, key: str, waiter: Waiter) -> None:
        """Call ``waiter[0](waiter)`` once the caller holds a turn for ``key`` (now if it may
        go); ``give(key)`` ends it."""
        queue = self._queues.get(key)
        held = self._active.get(key, 0)
        if queue is None:
            if held < self.per_key and self.running < self.most:
                self._active[key] = held + 1
                self.running += 1
                waiter[0](waiter)
                return
            self._queues[key] = waiter
        elif isinstance(queue, deque):
            queue.append(waiter)
        else:
            self._queues[key] = deque((queue, waiter))
        if held < self.per_key:
            self._mark_ready(key)

    def _mark_ready(self, key: str) -> None:
        if key not in self._in_ready:
            self._in_ready.add(key)
            self._ready.append(key)

    def take(self, key: str) -> Deferred[None]:
        """Fires when the caller holds a turn for ``key``; ``give(key)`` ends it."""
        d: Deferred[None] = Deferred()
        self.call(key, (_fire, d))
        return d

    def give(self, key: str) -> None:
        """A holder of ``key`` is done: the next waiter that may go goes."""
        held = self._active.get(key, 0) - 1
        if held > 0:
            self._active[key] = held
        else:
            self._active.pop(key, None)
        self.running -= 1
        if key in self._queues:
            self._mark_ready(key)
        if self._handing:  # the loop below, further up the stack, hands it out
            return
        self._handing = True
        try:
            while self.running < self.most and self._ready:
                ready = self._ready.popleft()
                self._in_ready.discard(ready)
                held = self._active.get(ready, 0)
                if held >= self.per_key or ready not in self._queues:
                    continue  # full again, or emptied: marked again when a holder gives back
                self._active[ready] = held + 1
                self.running += 1
                waiter = self._next(ready)
                if ready in self._queues and held + 1 < self.per_key:
                    self._mark_ready(ready)
                waiter[0](waiter)
        finally:
            self._handing = False

    def _next(self, key: str) -> Waiter:
        """The first waiter of ``key``, taken from its queue."""
        queue = self._queues[key]
        if not isinstance(queue, deque):
            del self._queues[key]
            return queue
        waiter = queue.popleft()
        if not queue:
            del self._queues[key]
        return waiter

    @property
    def waiting(self) -> int:
        return sum(len(q) if isinstance(q, deque) else 1 for q in self._queues.values())
