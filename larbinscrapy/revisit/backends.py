"""The two places a schedule lives (a local store, Redis), behind one asynchronous face."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.python.threadpool import ThreadPool

from larbinscrapy.reactor import defer_to_pool

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.redis_store import RedisRevisitStore
    from larbinscrapy.revisit.store import RevisitStore


class LocalSchedule:
    """One process's schedule on disk."""

    def __init__(
        self, store: RevisitStore, inflight: int, lease: float, count: Callable[[str, int], None]
    ) -> None:
        self.store = store
        self.inflight = inflight
        self.lease = lease
        self.count = count
        self.opened = False
        self._again: list[Entry] = []  # in flight at a crash, handed out again at open

    @property
    def tick_interval(self) -> float:
        """Seconds between looks for due pages: a bucket (the store's width, known at open)."""
        return self.store.width

    def open(self) -> list[Entry]:
        """Open; return the due pages handed out before a crash (the frontier may lack them).

        None after a clean close: the frontier flushed every page it was handed. ``OSError`` /
        ``ValueError`` for a schedule that cannot be read (a corrupt checkpoint).
        """
        if not self.opened:
            self.store.open()
            self.opened = True
            self.count("recovered", self.store.recovered)
            self._again = [] if self.store.closed_cleanly else self.store.inflight()
        return self._again

    def close(self) -> None:
        self.count("duplicates", self.store.duplicates)
        self.store.close()

    def checkpoint(self) -> None:
        self.store.checkpoint()

    def pending(self) -> bool:
        return len(self.store) > 0

    def __len__(self) -> int:
        return len(self.store)

    def current(self, token: Entry) -> Entry | None:
        """The flight entry a request stands for; ``None`` for a stale copy."""
        entry = self.store.in_flight(token.fp)
        return entry if entry is not None and entry.fetch_count == token.fetch_count else None

    def due(self, token: Entry) -> defer.Deferred[Entry | None]:
        """``current``, as the shared schedule answers it."""
        return defer.succeed(self.current(token))

    def take(self, now: float) -> defer.Deferred[list[Entry]]:
        for entry in self.store.expired(now, self.lease):
            self.count("expired", 1)
            self.store.done(entry.evolve(due=now))
        room = self.inflight - len(self.store.flight)
        return defer.succeed(self.store.take_due(now, room) if room > 0 else [])

    def add(self, entry: Entry) -> defer.Deferred[bool]:
        self.store.add(entry)
        return defer.succeed(True)

    def done(self, old: Entry, new: Entry) -> defer.Deferred[bool]:
        if self.current(old) is None:
            return defer.succeed(False)
        self.store.done(new)
        return defer.succeed(True)

    def forget(self, old: Entry) -> defer.Deferred[bool]:
        """The page is gone for good: never revisit it."""
        if self.current(old) is None:
            return defer.succeed(False)
        self.store.forget(old)
        return defer.succeed(True)


class SharedSchedule:
    """The schedule every worker shares in Redis."""

    tick_interval = 0.25  # seconds: as the Redis scheduler polls

    def __init__(
        self, store: RedisRevisitStore, lease: float, count: Callable[[str, int], None]
    ) -> None:
        self.store = store
        self.lease = lease
        self.count = count
        self.total: int | None = None  # pages scheduled, as the last take saw it
        self._pool = ThreadPool(1, 1, name="larbin-revisit-redis")

    def _run(self, func: Callable[..., Any], *args: Any) -> defer.Deferred[Any]:
        return defer_to_pool(self._pool, func, *args)

    def open(self) -> list[Entry]:
        self._pool.start()
        return []  # a dead worker's flight entries come back through the lease

    def close(self) -> None:
        self._pool.stop()  # waits for the queued writes

    def checkpoint(self) -> None:
        """Redis persists on its own (its AOF/RDB settings)."""

    def pending(self) -> bool:
        return self.total is None or self.total > 0

    def __len__(self) -> int:
        return self.total or 0

    def current(self, token: Entry) -> Entry | None:
        return token  # checked in Redis when the fetch is done (``done``)

    def due(self, token: Entry) -> defer.Deferred[Entry | None]:
        """The flight entry a request stands for, asked of Redis before the fetch: ``None`` for
        a copy made stale by another copy's fetch (a page handed out again after its lease, or
        by the frontier after a worker died). If Redis does not answer, the page is fetched:
        ``done`` still applies one copy only."""

        def answered(held: bool) -> Entry | None:
            return token if held else None

        def unanswered(failure: Any) -> Entry:
            self.count("check_failed", 1)
            return token

        return self._run(self.store.in_flight, token).addCallbacks(answered, unanswered)

    def take(self, now: float) -> defer.Deferred[list[Entry]]:
        def taken(result: tuple[int, int | None, list[Entry]]) -> list[Entry]:
            expired, self.total, entries = result  # total None: a shard failed (not empty)
            self.count("expired", expired)
            if self.total is None:
                self.count("take_failed", 1)
            return entries

        return self._run(self.store.take, now, self.lease).addCallback(taken)

    def add(self, entry: Entry) -> defer.Deferred[bool]:
        return self._run(self.store.add, entry)

    def done(self, old: Entry, new: Entry) -> defer.Deferred[bool]:
        return self._run(self.store.done, old, new)

    def forget(self, old: Entry) -> defer.Deferred[bool]:
        """The page is gone for good: its schedule is removed from Redis."""
        return self._run(self.store.forget, old)
