"""``lean/http1tcp.py`` against Twisted's ``connectTCP``: the same events for the same socket.

The lean handler dials on asyncio's transport; the Twisted factory and protocol above it must
see what ``reactor.connectTCP`` gave them, or the handler's error mapping (refused, timeout,
reset, data loss) would change meaning. Each case dials a real loopback socket through both.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import threading
import time
from typing import Any

import pytest
from twisted.internet import reactor
from twisted.internet.protocol import ClientFactory, Protocol

from larbinscrapy.lean.http1tcp import connect_tcp
from tests.support.http1 import run, silent_listener
from tests.support.wait import wait_for

WAYS = ["twisted", "asyncio"]


class Recorder(Protocol):
    """Each event the protocol sees, with the class of what came with it."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events

    def connectionMade(self) -> None:
        self.events.append(("made", type(self.transport.getPeer()).__name__))

    def dataReceived(self, data: bytes) -> None:
        self.events.append(("data", data))

    def connectionLost(self, reason: Any) -> None:
        self.events.append(("lost", type(reason.value).__name__))


class Factory(ClientFactory):
    """Builds one ``Recorder``; the connector's failure and loss go to the same list."""

    noisy = False

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.protocol_: Recorder | None = None

    def buildProtocol(self, addr: Any) -> Recorder:
        self.protocol_ = Recorder(self.events)
        return self.protocol_

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        self.events.append(("failed", type(reason.value).__name__))

    def clientConnectionLost(self, connector: Any, reason: Any) -> None:
        self.events.append(("client lost", type(reason.value).__name__))


def dial(way: str, port: int, timeout: float = 5) -> tuple[Factory, Any]:
    factory = Factory()

    async def go() -> Any:
        if way == "twisted":
            return reactor.connectTCP("127.0.0.1", port, factory, timeout=timeout)  # type: ignore[attr-defined]
        return connect_tcp(reactor, "127.0.0.1", port, factory, timeout)  # type: ignore[arg-type]

    return factory, run(go())


def until(factory: Factory, event: str, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not any(e[0] == event for e in factory.events) and time.monotonic() < deadline:
        run(asyncio.sleep(0.01))


class Server:
    """One loopback listener; each accepted socket is handed to ``serve``, in turn, in a
    thread."""

    def __init__(self, serve: Any = None, backlog: int = 16) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.serve = serve
        self.got: list[bytes] = []
        if serve is not None:
            threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:  # until closed
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.serve(self, conn)

    def close(self) -> None:
        self.sock.close()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("way", WAYS)
def test_a_refused_connect_fails_as_twisted_says(way: str) -> None:
    factory, _ = dial(way, _closed_port())
    until(factory, "failed")
    assert factory.events == [("failed", "ConnectionRefusedError")]


@pytest.mark.parametrize("way", WAYS)
def test_a_connect_past_its_timeout_and_one_given_up_fail_as_twisted_says(way: str) -> None:
    with silent_listener() as port:
        start = time.monotonic()
        timed, _ = dial(way, port, timeout=0.5)
        until(timed, "failed")
        took = time.monotonic() - start
        given_up, connector = dial(way, port, timeout=30)
        connector.disconnect()
        until(given_up, "failed")
    assert timed.events == [("failed", "TimeoutError")]
    assert 0.4 < took < 3
    assert given_up.events == [("failed", "UserError")]


def _send_then_close(server: Server, conn: socket.socket) -> None:
    conn.sendall(b"hi")
    time.sleep(0.1)
    conn.close()


def _send_then_reset(server: Server, conn: socket.socket) -> None:
    conn.sendall(b"hi")
    time.sleep(0.1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _read_all(server: Server, conn: socket.socket) -> None:
    try:
        while chunk := conn.recv(65536):
            server.got.append(chunk)
    except ConnectionResetError:  # an abort resets the connection once the bytes are read
        pass
    conn.close()


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    ("serve", "lost"), [(_send_then_close, "ConnectionDone"), (_send_then_reset, "ConnectionLost")]
)
def test_what_the_peer_sends_and_how_it_closes_as_twisted_says(
    way: str, serve: Any, lost: str
) -> None:
    server = Server(serve)
    try:
        factory, _ = dial(way, server.port)
        until(factory, "client lost")
    finally:
        server.close()
    assert factory.events == [
        ("made", "IPv4Address"),
        ("data", b"hi"),
        ("lost", lost),
        ("client lost", lost),
    ]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize(
    ("close", "lost"), [("lose", "ConnectionDone"), ("abort", "ConnectionAborted")]
)
def test_a_close_of_our_own_as_twisted_says(way: str, close: str, lost: str) -> None:
    server = Server(_read_all)
    try:
        factory, _ = dial(way, server.port)
        until(factory, "made")
        assert factory.protocol_ is not None
        transport: Any = factory.protocol_.transport
        transport.write(b"GET / HTTP/1.1\r\n\r\n")
        if close == "lose":
            transport.loseConnection()
        else:
            run(asyncio.sleep(0.1))  # written before the abort (Twisted writes on the next turn)
            transport.abortConnection()
        until(factory, "client lost")
        wait_for(lambda: server.got, 5, "the server to read the request")
    finally:
        server.close()
    assert factory.events == [("made", "IPv4Address"), ("lost", lost), ("client lost", lost)]
    assert b"".join(server.got) == b"GET / HTTP/1.1\r\n\r\n"


def _tls_answer(server: Server, conn: socket.socket) -> None:
    tls = server.tls.wrap_socket(conn, server_side=True)  # type: ignore[attr-defined]
    got = b""
    while b"\r\n\r\n" not in got:
        got += tls.recv(65536)
    server.got.append(got)
    tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    try:
        server.got.append(tls.recv(65536))  # b"": the client's close_notify, a clean close
    except ssl.SSLError as exc:  # the socket closed without it
        server.got.append(type(exc).__name__.encode())
    tls.close()


class Asker(Recorder):
    """Writes its request once connected (over TLS: before the handshake ends) and closes the
    connection as soon as the answer is in."""

    def connectionMade(self) -> None:
        super().connectionMade()
        self.transport.write(b"GET / HTTP/1.1\r\nHost: a.tcp.test\r\n\r\n")  # type: ignore[union-attr]

    def dataReceived(self, data: bytes) -> None:
        super().dataReceived(data)
        self.transport.loseConnection()  # type: ignore[union-attr]


def test_over_tls_the_request_and_the_close_notify_reach_the_server(tmp_path: Any) -> None:
    """Over TLS, writes are held to the end of the loop's turn and sent together: none is lost,
    the request written before the handshake ends and the close_notify of a close included
    (the server sees a clean TLS close, not a socket closed under it)."""
    from twisted.internet.ssl import Certificate, optionsForClientTLS
    from twisted.protocols.tls import TLSMemoryBIOFactory

    from testweb.internet.tls import TestCA

    ca = TestCA(tmp_path, "tcp.test")
    server = Server(_tls_answer)
    server.tls = ca.default  # type: ignore[attr-defined]
    try:
        inner = Factory()
        inner.buildProtocol = lambda addr: Asker(inner.events)  # type: ignore[method-assign]
        trust = Certificate.loadPEM(ca.ca_path.read_bytes())
        factory = TLSMemoryBIOFactory(optionsForClientTLS("a.tcp.test", trust), True, inner)

        async def go() -> None:
            connect_tcp(reactor, "127.0.0.1", server.port, factory, 5)  # type: ignore[arg-type]

        run(go())
        until(inner, "client lost")
        wait_for(lambda: len(server.got) == 2, 5, "the server to see the close")
    finally:
        server.close()
    assert ("data", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") in inner.events
    assert server.got == [b"GET / HTTP/1.1\r\nHost: a.tcp.test\r\n\r\n", b""]


@pytest.mark.parametrize("way", WAYS)
def test_a_connector_dials_again_once_its_connection_is_over(way: str) -> None:
    """``IConnector.connect`` once the connection is lost (what a reconnecting factory
    does): a second connection, told to the same factory; while one is open, it refuses."""
    server = Server(_send_then_close)
    try:
        factory, connector = dial(way, server.port)

        async def again() -> None:  # from the reactor's thread, with its loop running
            connector.connect()

        until(factory, "made")
        with pytest.raises(RuntimeError):  # connected: not twice at once
            run(again())
        until(factory, "client lost")
        run(again())
        deadline = time.monotonic() + 5
        while [e[0] for e in factory.events].count("client lost") < 2:
            assert time.monotonic() < deadline, factory.events
            run(asyncio.sleep(0.01))
    finally:
        server.close()
    once = [("made", "IPv4Address"), ("data", b"hi"), ("lost", "ConnectionDone")]
    assert factory.events == [*once, ("client lost", "ConnectionDone")] * 2
