"""The lean handler's connections: idle keep-alive ones per (host, port), and new ones.

``ConnectionPool`` keeps idle ``http1conn.Connection`` objects, LIFO, at most ``max_idle`` per
key and ``idle_max`` in all (``LARBIN_FETCH_IDLE_MAX``: an idle https connection holds
OpenSSL's state, and a broad crawl leaves thousands idle until their servers close them; the
least recently used goes, ``larbin/http1/idle_closed``), and closes those idle longer than
``idle_timeout`` from one sweep timer (not one timer per connection). It also holds the cap on
open connections (``LARBIN_FETCH_CONNECTIONS_MAX``, by default derived from ``RLIMIT_NOFILE``):
at the cap the least recently used idle connection is closed for a new one, and a socket the OS
refuses (EMFILE) makes the download wait, not fail.
``Dialer`` connects one TCP connection for a waiting download; ``connect_error``
turns a connect or DNS failure into the exception Scrapy's handler raises for it.

Replaces: Twisted's ``HTTPConnectionPool`` and ``HostnameEndpoint`` for the lean handler.
Private names: none. Retire when: as ``http1.py``.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import resource
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
)
from twisted.internet import error as tx
from twisted.internet.protocol import ClientFactory

from larbinscrapy.lean.http1conn import Connection

if TYPE_CHECKING:
    from collections.abc import Callable

    from twisted.internet.interfaces import IAddress
    from twisted.python.failure import Failure


OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
FD_RESERVE_MAX = 256  # descriptors kept for the frontier's files, logs and the rest


def connections_max(setting: int) -> int:
    """The cap on open connections: ``setting``, or (0) what ``RLIMIT_NOFILE`` leaves once
    half of it, at most ``FD_RESERVE_MAX``, is kept for files."""
    if setting > 0:
        return setting
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 0
    return max(1, soft - min(soft // 2, FD_RESERVE_MAX))


class OutOfDescriptors(Exception):
    """The OS refused a socket (EMFILE/ENFILE): the download waits and dials again."""


class ConnectionPool:
    """Idle keep-alive connections per key (LIFO, bounded, closed when idle too long) and the
    count of open ones under one cap (``max_open``, 0 = none).

    A new connection takes a ``slot()``; at the cap the least recently used idle connection
    is closed for it, or the slot waits until one closes. A slot is given back when its
    connect fails, its connection is lost, or ``release`` (nothing was dialled).
    """

    def __init__(
        self,
        reactor: Any,
        max_idle: int,
        idle_timeout: float,
        max_open: int = 0,
        *,
        idle_max: int = 0,
        stats: Any = None,
    ) -> None:
        self.reactor = reactor
        self.max_idle = max_idle
        self.idle_max = idle_max  # idle connections in all at most (0: none but the open cap)
        self.stats = stats
        self.idle_timeout = idle_timeout
        self.max_open = max_open
        self.limit = max_open  # lowered for a while when the OS runs out of descriptors
        self.open = 0  # connections dialling or connected (slots taken)
        self.idle: dict[Any, list[Connection]] = {}
        self.lru: dict[Connection, None] = {}  # every idle connection, least recent first
        self._slots: deque[asyncio.Future[None]] = deque()
        # idle connections closed for waiting slots whose loss (which frees the slot) is not
        # in yet: one close a waiting download, or connections coming idle meanwhile are
        # closed too and the crawl holds fewer than its cap
        self._closing: set[Connection] = set()
        self._sweeper: Any = None
        self.closed_for_cap = 0  # idle connections closed to stay under the cap

    def take(self, key: Any) -> Connection | None:
        conns = self.idle.get(key)
        while conns:
            conn = conns.pop()
            self.lru.pop(conn, None)
            if not conns:
                del self.idle[key]
            if not conn.lost:
                return conn
            conns = self.idle.get(key)
        return None

    def put(self, conn: Connection) -> None:
        conns = self.idle.setdefault(conn.key, [])
        conns.append(conn)
        self.lru[conn] = None
        conn.idle_since = self.reactor.seconds()
        if len(conns) > self.max_idle:
            self._close_idle(conns[0])
        elif self.idle_max and len(self.lru) > self.idle_max:  # the least recently used goes
            self._close_idle(next(iter(self.lru)))
            if self.stats is not None:
                self.stats.inc_value("larbin/http1/idle_closed")
        if self._slots:
            self._grant()
        if self._sweeper is None:
            self._sweeper = self.reactor.callLater(self.idle_timeout / 2, self._sweep)

    def discard(self, conn: Connection) -> None:
        self.lru.pop(conn, None)
        conns = self.idle.get(conn.key)
        if conns and conn in conns:
            conns.remove(conn)
            if not conns:
                del self.idle[conn.key]

    # -- the cap on open connections ------------------------------------------------------------
    def slot(self) -> asyncio.Future[None]:
        """A future done when a new connection may be opened (the slot is then taken)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slots.append(fut)
        self._grant()
        return fut

    def forfeit(self, fut: asyncio.Future[None]) -> None:
        """The download that asked for ``fut`` gave up: give its slot back if it had one."""
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            self.release()

    def release(self) -> None:
        """A slot's connection closed, failed, or was never dialled."""
        self.open = max(0, self.open - 1)
        if self._slots:
            self._grant()

    def lost(self, conn: Connection) -> None:
        """A connection built by a ``Dialer`` is gone (its ``on_lost``)."""
        self.discard(conn)
        self._closing.discard(conn)
        self.release()

    def out_of_descriptors(self) -> None:
        """The OS refused a socket: hold the cap at what is open now, free some idle ones."""
        self.limit = max(1, self.open)
        for conn in list(self.lru)[: max(1, len(self.lru) // 8)]:
            self._close_idle(conn)
        self.reactor.callLater(self.idle_timeout / 4, self._restore_limit)

    def _restore_limit(self) -> None:
        self.limit = self.max_open
        if self._slots:
            self._grant()

    def _grant(self) -> None:
        """Hand out slots while under the cap, closing idle connections for them at the cap."""
        slots = self._slots
        while slots:
            if slots[0].done():  # given up (timed out, cancelled)
                slots.popleft()
                continue
            if self.limit and self.open >= self.limit:
                if not self.lru or not self._waiting_more_than(len(self._closing)):
                    return  # wait for a connection to close
                conn = next(iter(self.lru))
                self._closing.add(conn)
                self._close_idle(conn)  # its loss frees the slot (release)
                self.closed_for_cap += 1
                return
            self.open += 1
            slots.popleft().set_result(None)

    def _waiting_more_than(self, n: int) -> bool:
        """More than ``n`` downloads wait for a slot (the given-up ones do not count)."""
        live = 0
        for fut in self._slots:
            if not fut.done():
                live += 1
                if live > n:
                    return True
        return False

    def _close_idle(self, conn: Connection) -> None:
        self.discard(conn)
        conn.close()  # connectionLost gives its slot back

    def _sweep(self) -> None:
        """Close the connections idle for longer than the timeout; again later if any is left."""
        self._sweeper = None
        old = self.reactor.seconds() - self.idle_timeout
        for conn in list(self.lru):
            if conn.idle_since > old:
                break  # the rest went idle later
            self._close_idle(conn)
        if self.idle:
            self._sweeper = self.reactor.callLater(self.idle_timeout / 2, self._sweep)

    def close(self) -> None:
        if self._sweeper is not None and self._sweeper.active():
            self._sweeper.cancel()
        self._sweeper = None
        for conns in list(self.idle.values()):
            for conn in list(conns):
                transport: Any = conn.transport
                transport.loseConnection()
        self.idle.clear()
        self.lru.clear()
        self._closing.clear()


class Dialer(ClientFactory):
    """Connects one TCP connection and hands its protocol to the waiting download."""

    noisy = False

    def __init__(
        self,
        fut: asyncio.Future[Connection],
        pool: ConnectionPool,
        key: Any,
        make: Callable[..., Connection] = Connection,
    ) -> None:
        self.fut: asyncio.Future[Connection] | None = fut  # None once the connection is gone
        self.pool = pool
        self.key = key
        self.make = make  # the connection class (or a partial of it: TLSConnection's site)

    def buildProtocol(self, addr: IAddress | None) -> Connection:
        conn = self.make(self)
        conn.key = self.key
        conn.ip_address = ipaddress.ip_address(getattr(addr, "host", "") or "0.0.0.0")
        return conn

    def made(self, conn: Connection) -> None:  # ConnectionOwner: connected
        if self.fut is None or self.fut.done():  # the download gave up while connecting
            conn.close()
        else:
            self.fut.set_result(conn)

    def idle(self, conn: Connection) -> None:  # ConnectionOwner: back to the pool
        self.pool.put(conn)

    def lost(self, conn: Connection) -> None:  # ConnectionOwner: gone
        self.pool.lost(conn)
        self.fut = None  # its result is the connection, which names this dialer: no cycle

    def clientConnectionLost(self, connector: Any, reason: Failure) -> None:
        # Twisted's client and connector name each other for good; the connector's
        # ``transport`` is None before a connection too, so clearing it breaks the cycle
        # without changing what the connector does next.
        connector.transport = None

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        self.pool.release()
        exc = reason.value
        if isinstance(exc, tx.ConnectError) and exc.osError in OUT_OF_FDS:
            self.pool.out_of_descriptors()
            exc = OutOfDescriptors(str(exc))
        if self.fut is not None and not self.fut.done():
            self.fut.set_exception(exc if isinstance(exc, OutOfDescriptors) else connect_error(exc))


def connect_error(exc: BaseException | None) -> BaseException:
    """A connect or DNS failure as Scrapy's handler raises it (``wrap_twisted_exceptions``)."""
    wrapped: BaseException
    if exc is None:
        return tx.ConnectError("connection failed")
    if isinstance(exc, tx.ConnectionRefusedError):
        wrapped = DownloadConnectionRefusedError(str(exc))
    elif isinstance(exc, tx.DNSLookupError):
        wrapped = CannotResolveHostError(str(exc))
    elif isinstance(exc, tx.TimeoutError):
        wrapped = DownloadTimeoutError(str(exc))
    else:
        return exc
    wrapped.__cause__ = exc
    return wrapped
