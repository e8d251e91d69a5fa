"""For tests/test_http1*.py: a scripted raw-socket HTTP server and both handlers on one reactor.

The server runs on the test process's own asyncio reactor (``run(coro)`` drives its loop), so
a case can write what no HTTP library would send: a reset in the middle of a body, a 1 MB
header line, a close before any byte, an answer that never comes.
Each path of ``RawWeb.script`` is a list of actions done on receipt of a request head:
``b"..."`` writes bytes, ``"close"`` closes, ``"reset"`` resets, ``"hang"`` waits forever,
``"drop_if_reused"`` closes without answering when the connection carried a request before
(a stale keep-alive connection), a number waits that many seconds before the next action.
Every raw request head is kept in ``requests``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.reactor import install_reactor, is_reactor_installed
from scrapy.utils.test import get_crawler

if not is_reactor_installed():
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from twisted.internet import reactor
from twisted.internet.protocol import Factory, Protocol

from settings import base
from tests.support.wait import wait_for

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator

HANDLERS = {
    "scrapy": "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler",
    "lean": "larbinscrapy.lean.http1.LeanHttpDownloadHandler",
}
BASE_SETTINGS = {k: v for k, v in vars(base).items() if k.startswith("LARBIN_")}

LOOP: asyncio.AbstractEventLoop = reactor._asyncioEventloop  # type: ignore[attr-defined]


def run(coro: Coroutine[Any, Any, Any], timeout: float = 20) -> Any:
    """Run ``coro`` on the reactor's loop until it is done.

    The reactor is not ``run()`` (it could not be restarted for the next test): its thread pool,
    which Scrapy's handler resolves names in, is started here and stopped by ``stop_threads``.
    """
    pool = reactor.getThreadPool()  # type: ignore[attr-defined]
    if not pool.started:
        pool.start()
    return LOOP.run_until_complete(asyncio.wait_for(coro, timeout))


def settle(seconds: float = 0.05) -> None:
    """Let the reactor run a little (connections close, servers see it)."""
    run(asyncio.sleep(seconds))


def make_handler(name: str, **settings: Any) -> tuple[Any, Any]:
    """(handler, crawler) for ``name`` (``scrapy`` or ``lean``) built from a bare crawler."""
    crawler = get_crawler(
        settings_dict={**BASE_SETTINGS, "CONCURRENT_REQUESTS_PER_DOMAIN": 8, **settings}
    )
    return build_from_crawler(load_object(HANDLERS[name]), crawler), crawler


class _Scripted(Protocol):
    def __init__(self, web: RawWeb) -> None:
        self.web = web
        self.buffer = b""
        self.served = 0
        self.hung = False

    def connectionMade(self) -> None:
        self.web.connections += 1
        self.web.open.add(self)

    def connectionLost(self, reason: Any = None) -> None:
        self.web.open.discard(self)
        self.web.lost += 1

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        while not self.hung and b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            self.buffer = rest[length:]
            self.web.requests.append(head + b"\r\n\r\n" + rest[:length])
            if not self._answer(head.split(b" ")[1].decode().split("?")[0]):
                return

    def _answer(self, path: str) -> bool:
        """Do the path's actions; False when the connection is done (or the rest is later)."""
        reused = self.served > 0
        self.served += 1
        return self._act(self.web.script[path], reused)

    def _act(self, actions: list[Any], reused: bool) -> bool:
        transport: Any = self.transport
        for i, action in enumerate(actions):
            if isinstance(action, bytes):
                transport.write(action)
            elif isinstance(action, (int, float)):
                self.hung = True
                reactor.callLater(action, self._act, actions[i + 1 :], reused)  # type: ignore[attr-defined]
                return False
            elif action == "close" or (action == "drop_if_reused" and reused):
                transport.loseConnection()
                return False
            elif action == "reset":
                transport.abortConnection()
                return False
            elif action == "hang":
                self.hung = True
                return False
        return True


class RawWeb:
    """The scripted server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, script: dict[str, list[Any]]) -> None:
        self.script = script
        self.requests: list[bytes] = []
        self.connections = 0
        self.lost = 0
        self.open: set[_Scripted] = set()
        factory = Factory.forProtocol(lambda: _Scripted(self))  # type: ignore[arg-type]
        self.port = reactor.listenTCP(0, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.base = f"http://127.0.0.1:{self.port.getHost().port}"

    def url(self, path: str) -> str:
        return self.base + path

    def stop(self) -> None:
        for proto in list(self.open):
            proto.transport.abortConnection()  # type: ignore[union-attr]
        stopped = self.port.stopListening()
        if stopped is not None:
            run(stopped.asFuture(LOOP))
        wait_for(lambda: not self.open, 5, "the aborted connections closed", pause=settle)


@contextmanager
def plain_reactor() -> Iterator[None]:
    """The reactor as a fresh process has it, for one module: Twisted's threaded resolver.

    An earlier test module may have built a crawler that installed larbinscrapy's
    ``PinnedResolver`` (whose SSRF guard refuses the loopback addresses used here) on the one
    reactor all tests share. Restored, and the thread pool stopped, afterwards.
    """
    from twisted.internet.base import ThreadedResolver

    old = reactor.installResolver(ThreadedResolver(reactor))  # type: ignore[attr-defined]
    try:
        yield
    finally:
        reactor.installResolver(old)  # type: ignore[attr-defined]
        stop_threads()


def stop_threads() -> None:
    """Stop the reactor's thread pool (the resolver's): its threads would keep pytest alive."""
    pool = getattr(reactor, "threadpool", None)
    if pool is not None:
        pool.stop()
        reactor.threadpool = None  # type: ignore[attr-defined]


@contextmanager
def silent_listener() -> Iterator[int]:
    """A loopback port whose accept queue is full: the kernel drops further SYNs, so a connect
    to it neither succeeds nor fails until its timeout (a server that never answers)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    try:
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(listener.getsockname())
            fillers.append(filler)
        time.sleep(0.1)
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for filler in fillers:
            filler.close()
