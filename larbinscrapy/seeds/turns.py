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

from twisted.internet.defer import Deferred, succeed


class Turns:
    """At most ``most`` holders in all and one per key (an IP); the others wait, per key in
    arrival order, keys in the order they became ready."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self.running = 0
        self._active: set[str] = set()  # keys with a holder
        self._queues: dict[str, deque[Deferred[None]]] = {}  # keys with a holder or a waiter
        self._ready: deque[str] = deque()  # free keys whose first waiter waits for room

    def take(self, key: str) -> Deferred[None]:
        """Fires when the caller holds a turn for ``key``; ``give(key)`` ends it."""
        queue = self._queues.setdefault(key, deque())
        if key not in self._active and not queue and self.running < self.most:
            self._active.add(key)
            self.running += 1
            return succeed(None)
        d: Deferred[None] = Deferred()
        queue.append(d)
        if key not in self._active and len(queue) == 1:
            self._ready.append(key)
        return d

    def give(self, key: str) -> None:
        """The holder of ``key`` is done: the next waiter that may go goes."""
        self._active.discard(key)
        self.running -= 1
        if self._queues.get(key):
            self._ready.append(key)
        else:
            self._queues.pop(key, None)
        while self.running < self.most and self._ready:
            ready = self._ready.popleft()
            self._active.add(ready)
            self.running += 1
            self._queues[ready].popleft().callback(None)

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())
