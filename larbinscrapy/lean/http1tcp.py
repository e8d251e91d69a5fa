"""The lean handler's TCP: asyncio's own socket transport under Twisted's protocols.

Twisted's ``connectTCP`` on the asyncio reactor reads and writes each socket in Python (a
readiness callback per event, in Twisted's log context, then ``doRead``/``doWrite``); asyncio's
transport does that in its loop and writes without waiting for a writable event (over TLS, what
one turn of the loop wrote goes at its end, in one system call). ``connect_tcp`` dials with
``loop.create_connection`` and hands the socket to the same Twisted factory and protocols as
before (``http1pool.Dialer``; Twisted's TLS over pyOpenSSL), so Scrapy's TLS settings,
certificates and Twisted's error types keep their meaning. ``_Stream`` is the asyncio protocol
and, to the Twisted protocol above it, its ``ITCPTransport``. Errors as Twisted's connector
gives them (``tests/test_http1_tcp.py`` dials through both). Replaces: ``reactor.connectTCP``
for ``http1.py``. Private name: asyncio's ``_read_ready_cb`` (``_unlink``). Retire when: as
``http1.py``. More: docs/modules.md.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import error as tx
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import IConnector, ITCPTransport
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

if TYPE_CHECKING:
    from twisted.internet.base import DelayedCall
    from twisted.internet.protocol import ClientFactory

    from larbinscrapy.reactor import Clock

logger = logging.getLogger(__name__)


def _address(sockaddr: Any) -> IPv4Address | IPv6Address:
    host, port = sockaddr[0], sockaddr[1]
    return IPv6Address("TCP", host, port) if ":" in host else IPv4Address("TCP", host, port)


def _unlink(transport: Any) -> None:
    """asyncio's socket transport (Python 3.11) keeps its own bound read method: a cycle each
    connection that only the cyclic collector would free. Broken once the connection is lost."""
    if getattr(transport, "_read_ready_cb", None) is not None:
        transport._read_ready_cb = None


@implementer(IConnector)
class Connector:
    """One TCP connection to ``host:port`` for ``factory``: what ``connectTCP`` returns."""

    def __init__(
        self, clock: Clock, host: str, port: int, factory: ClientFactory, timeout: float
    ) -> None:
        self.clock, self.host, self.port, self.timeout = clock, host, port, timeout
        self.factory: Any = factory  # mypy misreads Twisted's zope interfaces (reactor.py)
        self.stream: _Stream | None = None  # once connected
        self._task: asyncio.Task[Any] | None = None  # while dialling
        self._reason: BaseException | None = None  # why the dial was cancelled
        self._timer: DelayedCall | None = None

    def connect(self) -> None:
        """Dial (again, once the last connection or dial is over), as Twisted's does."""
        if self._task is not None or self.stream is not None:
            raise RuntimeError("cannot connect: already connecting or connected")
        self.factory.doStart()
        self.factory.startedConnecting(cast("IConnector", self))
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(
            loop.create_connection(lambda: _Stream(self), self.host, self.port)
        )
        self._task.add_done_callback(self._dialled)
        if self.timeout > 0:
            self._timer = self.clock.callLater(self.timeout, self._stop, tx.TimeoutError())

    def _stop(self, reason: BaseException) -> None:
        self._timer = None
        task = self._task
        if task is not None and not task.done():
            self._reason = reason
            task.cancel()

    def _dialled(self, task: asyncio.Task[Any]) -> None:
        self._task = None
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        if task.cancelled():
            reason: BaseException = self._reason or tx.UserError()
        else:
            exc = task.exception()
            if exc is None:
                return  # connected: the stream tells the factory from here
            reason = tx.getConnectError(exc) if isinstance(exc, OSError) else exc
        self._reason = None
        self.factory.clientConnectionFailed(self, Failure(reason))
        self.factory.doStop()

    def lost(self, reason: Failure) -> None:
        self.stream = None
        self.factory.clientConnectionLost(self, reason)
        self.factory.doStop()

    # -- IConnector -------------------------------------------------------------------------

    def disconnect(self) -> None:
        """Stop dialling (``UserError``), or close the connection."""
        if self.stream is not None:
            self.stream.loseConnection()
        else:
            self._stop(tx.UserError())

    def stopConnecting(self) -> None:
        self._stop(tx.UserError())

    def getDestination(self) -> IPv4Address | IPv6Address:
        return _address((self.host, self.port))


@implementer(ITCPTransport)
class _Stream(asyncio.Protocol):
    """asyncio's side: the socket's events to the Twisted protocol. Twisted's side: the
    transport that protocol writes to."""

    disconnecting = False

    def __init__(self, connector: Connector) -> None:
        self.connector = connector
        self.protocol: Any = None  # the Twisted protocol (an IProtocol) once connected
        self._transport: Any = None
        self._producer: Any = None
        self._aborted = False
        self._failure: Failure | None = None  # the protocol's own setup failed
        # written in this turn of the loop, sent together at its end (``_flush``): a TLS
        # handshake's last flight and the request behind it are one send, as on Twisted
        self._pending: list[bytes] | None = None
        self._coalesce = False  # only over TLS: a plain request is one write, sent at once
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        connector = self.connector
        protocol: Any = connector.factory.buildProtocol(self.getPeer())
        if protocol is None:
            transport.close()
            return
        connector.stream = self
        self.protocol = protocol
        self._coalesce = isinstance(protocol, TLSMemoryBIOProtocol)
        self._loop = asyncio.get_running_loop()
        try:
            protocol.makeConnection(self)
        except Exception:  # Twisted logs it and the connection is lost with it as the reason
            logger.exception("connection setup failed: %s:%s", connector.host, connector.port)
            self._failure = Failure()
            self.abortConnection()

    def data_received(self, data: bytes) -> None:
        protocol = self.protocol
        if protocol is not None:
            protocol.dataReceived(data)

    def eof_received(self) -> bool:
        return False  # as Twisted without half-close: the connection is done

    def connection_lost(self, exc: Exception | None) -> None:
        self.disconnecting = True  # writes from here on are dropped, as Twisted drops them
        protocol: Any = self.protocol
        self.protocol = None
        if protocol is None:
            return
        if self._failure is not None:
            reason, self._failure = self._failure, None
        elif self._aborted:
            reason = Failure(tx.ConnectionAborted())
        elif exc is None:
            reason = Failure(tx.ConnectionDone())
        else:
            reason = Failure(tx.ConnectionLost(str(exc)))
        self._producer = None
        self._pending = None
        _unlink(self._transport)
        try:
            protocol.connectionLost(reason)
        finally:
            self.connector.lost(reason)

    def pause_writing(self) -> None:
        if self._producer is not None:
            self._producer.pauseProducing()

    def resume_writing(self) -> None:
        if self._producer is not None:
            self._producer.resumeProducing()

    # -- ITCPTransport (what Twisted's protocols and http1conn call) -------------------------

    def write(self, data: bytes) -> None:
        """Send ``data`` at the end of this turn of the loop, with what else is written in it
        (each send to a socket is a system call)."""
        if self.disconnecting or not data:
            return
        if not self._coalesce:
            self._transport.write(data)
            return
        pending = self._pending
        if pending is None:
            self._pending = [data]
            assert self._loop is not None
            self._loop.call_soon(self._flush)
        else:
            pending.append(data)

    def writeSequence(self, data: Any) -> None:
        for chunk in data:
            self.write(chunk)

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending and not self._transport.is_closing():
            self._transport.write(pending[0] if len(pending) == 1 else b"".join(pending))

    def loseConnection(self) -> None:
        """Close once what was written is sent."""
        self._flush()
        self.disconnecting = True
        self._transport.close()

    def abortConnection(self) -> None:
        """Close now, what was not sent dropped."""
        self._pending = None
        self.disconnecting = True
        self._aborted = True
        self._transport.abort()

    def getPeer(self) -> IPv4Address | IPv6Address:
        return _address(self._transport.get_extra_info("peername"))

    def getHost(self) -> IPv4Address | IPv6Address:
        return _address(self._transport.get_extra_info("sockname"))

    def getHandle(self) -> socket.socket:
        sock: socket.socket = self._transport.get_extra_info("socket")
        return sock

    def setTcpNoDelay(self, enabled: bool) -> None:
        self.getHandle().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(enabled))

    def getTcpNoDelay(self) -> bool:
        return bool(self.getHandle().getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

    def setTcpKeepAlive(self, enabled: bool) -> None:
        self.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, int(enabled))

    def getTcpKeepAlive(self) -> bool:
        return bool(self.getHandle().getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE))

    def loseWriteConnection(self) -> None:
        if self._transport.can_write_eof():
            self._transport.write_eof()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        self._producer = producer

    def unregisterProducer(self) -> None:
        self._producer = None

    def pauseProducing(self) -> None:
        self._transport.pause_reading()

    def resumeProducing(self) -> None:
        if not self._transport.is_closing():
            self._transport.resume_reading()

    def stopProducing(self) -> None:
        self.loseConnection()


def connect_tcp(
    clock: Clock, host: str, port: int, factory: ClientFactory, timeout: float
) -> Connector:
    """``reactor.connectTCP(host, port, factory, timeout)`` on asyncio's transport."""
    connector = Connector(clock, host, port, factory, timeout)
    connector.connect()
    return connector
