"""The lean handler's connections: idle keep-alive ones per (host, port), and new ones.

``ConnectionPool`` keeps idle ``http1conn.Connection`` objects, LIFO, at most ``max_idle`` per
key, and closes those idle longer than ``idle_timeout`` from one sweep timer (not one timer per
connection). ``Dialer`` connects one TCP connection for a waiting download; ``connect_error``
turns a connect or DNS failure into the exception Scrapy's handler raises for it.

Replaces: Twisted's ``HTTPConnectionPool`` and ``HostnameEndpoint`` for the lean handler.
Private names: none. Retire when: as ``http1.py``.
"""

from __future__ import annotations

import ipaddress
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
    import asyncio
    from collections.abc import Callable

    from twisted.internet.interfaces import IAddress
    from twisted.python.failure import Failure


class ConnectionPool:
    """Idle keep-alive connections per key: LIFO, bounded, closed when idle too long."""

    def __init__(self, reactor: Any, max_idle: int, idle_timeout: float) -> None:
        self.reactor = reactor
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self.idle: dict[Any, list[Connection]] = {}
        self._sweeper: Any = None

    def take(self, key: Any) -> Connection | None:
        conns = self.idle.get(key)
        while conns:
            conn = conns.pop()
            if not conns:
                del self.idle[key]
            if not conn.lost:
                return conn
            conns = self.idle.get(key)
        return None

    def put(self, conn: Connection) -> None:
        conns = self.idle.setdefault(conn.key, [])
        conns.append(conn)
        conn.idle_since = self.reactor.seconds()
        if len(conns) > self.max_idle:
            conns.pop(0).close()
        if self._sweeper is None:
            self._sweeper = self.reactor.callLater(self.idle_timeout / 2, self._sweep)

    def discard(self, conn: Connection) -> None:
        conns = self.idle.get(conn.key)
        if conns and conn in conns:
            conns.remove(conn)
            if not conns:
                del self.idle[conn.key]

    def _sweep(self) -> None:
        """Close the connections idle for longer than the timeout; again later if any is left."""
        self._sweeper = None
        old = self.reactor.seconds() - self.idle_timeout
        for conns in list(self.idle.values()):
            for conn in [c for c in conns if c.idle_since <= old]:
                conn.close()  # connectionLost discards it
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


class Dialer(ClientFactory):
    """Connects one TCP connection and hands its protocol to the waiting download."""

    noisy = False

    def __init__(self, fut: asyncio.Future[Connection], pool: ConnectionPool, key: Any,
                 make: Callable[..., Connection] = Connection) -> None:
        self.fut = fut
        self.pool = pool
        self.key = key
        self.make = make  # the connection class (or a partial of it: TLSConnection's site)

    def buildProtocol(self, addr: IAddress | None) -> Connection:
        conn = self.make(self.connected, self.pool.put, self.pool.discard)
        conn.key = self.key
        conn.ip_address = ipaddress.ip_address(getattr(addr, "host", "") or "0.0.0.0")
        return conn

    def connected(self, conn: Connection) -> None:
        if self.fut.done():  # the download gave up while connecting
            conn.close()
        else:
            self.fut.set_result(conn)

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        if not self.fut.done():
            self.fut.set_exception(connect_error(reason.value))


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
