"""The simulated internet's web server: HTTP and HTTPS for every generated host, on asyncio.

One listening socket per (address, port): every listening address serves every host by its
Host header (shared hosting), so a few addresses carry thousands of names. Answers come from
``Internet.route`` (redirects http -> https and bare -> www, robots.txt variants, pages, 404s)
and are rendered on request from the seed: nothing is stored per host. A host's time to first
byte and bandwidth delay its answers with ``loop.call_later``; a tarpit host reads the request
and never answers. HTTP/1.1 keep-alive, requests on one connection answered in order, an idle
connection closed after ``idle_timeout``. One line of ``web.log`` per request (``logs.py``).
"""

from __future__ import annotations

import asyncio
import html
import logging
import random
import resource
import socket
from typing import TYPE_CHECKING

from testweb.internet.logs import LineLog
from testweb.internet.model import ROBOTS, ROBOTS_TEXT, Internet
from testweb.synthweb import _paragraph, _words

if TYPE_CHECKING:
    import ssl

    from testweb.internet.model import Host, Route

logger = logging.getLogger(__name__)

HEAD_MAX = 16384
FIRST_CHUNK = 4096  # sent at the time to first byte; the rest after size / bandwidth
BIND_ATTEMPTS = 20
_REASONS = {
    200: "OK",
    301: "Moved Permanently",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


# text made once: a page takes slices and picks of it (cheap: ~1,000 pages/s on one core)
_FILLER = " ".join(_paragraph(random.Random(f"filler:{n}")) for n in range(40))
_ANCHORS = [_words(random.Random(f"anchor:{n}"), 1, 3) for n in range(512)]
_TITLES = [_words(random.Random(f"title:{n}"), 2, 5).capitalize() for n in range(512)]


def render_page(internet: Internet, host: Host, k: int) -> bytes:
    """Page ``k`` of ``host`` as HTML: its links (own site root-relative) and seeded filler.

    The hrefs come from ``Internet.page_links`` (names, digits, ``/.:-``: nothing to escape).
    """
    r = random.Random(host.links_seed * 104729 + k).random
    own = internet.url(host)[:-1]
    title = _TITLES[int(r() * len(_TITLES))]
    parts = [
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title} - '
        f"{host.canonical} {k}</title></head>\n<body><h1>{title}</h1>\n"
    ]
    last, n_anchors = len(_FILLER) - 1600, len(_ANCHORS)
    for url in internet.page_links(host, k):
        href = url[len(own) :] if url.startswith(own + "/") else url
        at = int(r() * last)
        parts.append(
            f'<p>{_FILLER[at : at + 60 + int(r() * 180)]} <a href="{href}">'
            f"{_ANCHORS[int(r() * n_anchors)]}</a></p>\n"
        )
    at = int(r() * last)
    parts.append(f"<p>{_FILLER[at : at + 300 + int(r() * 1200)]}</p>\n</body></html>\n")
    return "".join(parts).encode()


def _body(internet: Internet, route: Route) -> tuple[bytes, str]:
    if route.location is not None:
        href = html.escape(route.location)
        return f'<html><body><a href="{href}">moved</a></body></html>'.encode(), "text/html"
    if route.page == ROBOTS and route.host is not None:
        text = ROBOTS_TEXT.get(
            route.host.robots, "server error\n" if route.status >= 500 else "not found\n"
        )
        return text.encode(), "text/plain"
    if route.status == 200 and route.host is not None:
        return render_page(internet, route.host, route.page), "text/html; charset=utf-8"
    return b"<html><body>not found</body></html>", "text/html"


class _Http(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: WebServer, scheme: str) -> None:
        self.server = server
        self.scheme = scheme
        self.buffer = b""
        self.busy = False  # an answer is being delayed: later requests wait in the buffer
        self.transport: asyncio.Transport | None = None
        self.local = ("", 0)
        self.idle: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sockname = transport.get_extra_info("sockname")
        self.local = (sockname[0], sockname[1])
        self.server.connections += 1
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections -= 1
        if self.idle is not None:
            self.idle.cancel()
        self.transport = None

    def _arm_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = self.server.loop.call_later(self.server.idle_timeout, self._close)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HEAD_MAX and b"\r\n\r\n" not in self.buffer:
            self._close()
            return
        self._next()

    def _next(self) -> None:
        while not self.busy and self.transport is not None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buffer = self.buffer[:end].decode("latin-1"), self.buffer[end + 4 :]
            self._arm_idle()
            self._request(head)

    def _request(self, head: str) -> None:
        lines = head.split("\r\n")
        parts = lines[0].split(" ")
        method, path = (parts[0], parts[1]) if len(parts) == 3 else ("", "/")
        hostname, close = "", parts[-1] == "HTTP/1.0"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "host":
                hostname = value.strip().lower()
                if hostname.rsplit(":", 1)[-1].isdigit():
                    hostname = hostname.rsplit(":", 1)[0]
            elif name == "connection":
                close = value.strip().lower() == "close"
        server = self.server
        route = server.internet.route(self.scheme, hostname, path)
        ip, port = self.local
        log_host = "".join(hostname.split()) or "-"
        if route.host is not None and route.host.tarpit:
            server.log.write(ip, port, log_host, path, "-")
            self.busy = True  # read, never answer: the client gives up on its own
            return
        status = route.status if method in ("GET", "HEAD") else 405
        server.log.write(ip, port, log_host, path, status)
        server.requests += 1
        body, ctype = _body(server.internet, route)
        headers = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'X')}",
            f"Content-Type: {ctype}",
            f"Content-Length: {len(body)}",
        ]
        if route.location is not None:
            headers.append(f"Location: {route.location}")
        if close:
            headers.append("Connection: close")
        data = ("\r\n".join(headers) + "\r\n\r\n").encode() + (b"" if method == "HEAD" else body)
        host = route.host
        ttfb = host.ttfb if host is not None and server.latency else 0.0
        rate = host.bandwidth if host is not None and server.latency else 0.0
        rest = max(0, len(data) - FIRST_CHUNK)
        if ttfb <= 0 and (rate <= 0 or rest == 0):
            self._send(data, close)
            return
        self.busy = True
        if rate > 0 and rest:
            server.loop.call_later(ttfb, self._send_part, data[:FIRST_CHUNK])
            server.loop.call_later(ttfb + rest / rate, self._send, data[FIRST_CHUNK:], close)
        else:
            server.loop.call_later(ttfb, self._send, data, close)

    def _send_part(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def _send(self, data: bytes, close: bool) -> None:
        if self.transport is None:
            return
        self.transport.write(data)
        self.busy = False
        if close:
            self.transport.close()
            return
        self._next()


class WebServer:
    """Listens on every address of ``internet.listening`` (and ``::1``) at the http and https
    ports; ports 0 pick free ones and are written back into ``internet``."""

    def __init__(
        self,
        internet: Internet,
        *,
        tls: ssl.SSLContext | None = None,
        log: str | LineLog | None = None,
        latency: bool = True,
        idle_timeout: float = 30.0,
        ipv6: bool = True,
    ) -> None:
        self.internet = internet
        self.tls = tls
        self.log = log if isinstance(log, LineLog) else LineLog(log)
        self.latency = latency
        self.idle_timeout = idle_timeout
        self.ipv6 = ipv6
        self.requests = 0
        self.connections = 0
        self._servers: list[asyncio.Server] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("the web server is not started")
        return self._loop

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        raise_fd_limit(2 * len(self.internet.listening) + 1024)
        addresses = list(self.internet.listening) + (["::1"] if self.ipv6 else [])
        self.internet.http_port = await self._listen_all(addresses, self.internet.http_port, "http")
        if self.tls is not None:
            self.internet.https_port = await self._listen_all(
                addresses, self.internet.https_port, "https"
            )

    async def _listen_all(self, addresses: list[str], port: int, scheme: str) -> int:
        """The same port on every address; with port 0, retried until one port fits them all."""
        error: OSError | None = None
        for _ in range(BIND_ATTEMPTS if port == 0 else 1):
            started: list[asyncio.Server] = []
            try:
                chosen = port
                for address in addresses:
                    started.append(await self._listen(address, chosen, scheme))
                    if chosen == 0:
                        chosen = started[0].sockets[0].getsockname()[1]
                self._servers += started
                return chosen
            except OSError as exc:
                error = exc
                for server in started:
                    server.close()
        assert error is not None
        raise error

    async def _listen(self, address: str, port: int, scheme: str) -> asyncio.Server:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        return await self.loop.create_server(
            lambda: _Http(self, scheme),
            address,
            port,
            family=family,
            backlog=1024,
            ssl=self.tls if scheme == "https" else None,
            reuse_address=True,
        )

    def close(self) -> None:
        for server in self._servers:
            server.close()
        self.log.close()


def raise_fd_limit(want: int) -> int:
    """Raise the soft RLIMIT_NOFILE towards ``want`` (up to the hard limit); returns the soft."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        soft = min(hard, max(want, soft))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft
