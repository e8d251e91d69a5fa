"""The hostile web: what the real web does to a crawler, served on loopback by a raw-socket server.

``python -m testweb --web hostile`` serves it (same info document and JSON request log as the
other webs). The server is a Twisted ``Protocol`` that writes its answers byte by byte, because
an HTTP library cannot misbehave enough: a tarpit that accepts and never answers, a connection
reset mid-body, a 1 MB header, an endless chunked body, gzip/deflate/brotli bombs (256 MB of
zeros each), a 30 MB page, 200 KB of random bytes served as text/html, a page of 100,000 links,
20,000 unclosed tags, a 429 storm, a lying Content-Type, an unknown charset, redirect loops,
redirects to forbidden targets, path and calendar traps, an endless site, session ids, and
robots meta / X-Robots-Tag / rel="nofollow" pages.

``HostileWeb`` is the model a test asserts against: ``good`` (URLs a correct crawler fetches),
``forbidden`` (URLs it must never request), ``redirect_forbidden`` (redirect targets it must
never request: the redirect-filter work of issue #14 item 2), ``good_main`` (the good pages of
the host that also serves the tarpit, reset and giant header). The settings a crawl of it needs
are in ``CRAWL_SETTINGS``.
"""

from __future__ import annotations

import logging
import random
import socket
import struct
import time
import zlib
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import brotli
from twisted.internet import protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

HOSTS = {
    "main.test": "127.0.5.1",  # good pages, plus a tarpit, a reset and a giant header
    "bombs.test": "127.0.5.2",  # bodies: bombs, huge, endless, random, lying, unknown charset
    "many.test": "127.0.5.3",  # a page of 100,000 links, 20,000 unclosed tags
    "storm.test": "127.0.5.4",  # 429 for everything
    "redir.test": "127.0.5.5",  # redirect loops and forbidden targets
    "traps.test": "127.0.5.6",  # path, depth and calendar traps, session ids
    "endless.test": "127.0.5.7",  # a site that makes up pages without end
    "meta.test": "127.0.5.8",  # robots meta, X-Robots-Tag, rel="nofollow", canonical
    "outside.example": "127.0.5.9",  # outside LARBIN_DOMAINS: only a redirect points here
}
# what the crawl of tests/test_hostile_web.py runs with (the traps need small caps to end soon)
CRAWL_SETTINGS = {
    "DOWNLOAD_TIMEOUT": 3,
    "LARBIN_DEPTH": -1,  # no depth limit: only the trap defence may end the traps
    "LARBIN_DOMAINS": "test",
    "LARBIN_GATE_PAGES_PER_SITE_MAX": 60,
    "LARBIN_GATE_QUERIES_PER_PATH_MAX": 15,
    "LARBIN_GATE_PATH_SEGMENTS_MAX": 10,
}
BOMB_BYTES = 256 * 1024 * 1024  # what each compression bomb inflates to
BIG_BYTES = 30 * 1024 * 1024
LINKS_ON_MANY = 100_000
CHUNK = 256 * 1024

_HTML = b"text/html; charset=utf-8"


def page(title: str, links: Sequence[str] = (), head: str = "") -> bytes:
    anchors = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
    return (
        f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1>\n"
        f"{anchors}</body></html>\n"
    ).encode()


@dataclass
class Answer:
    """What the server does with one request: ``kind`` picks the behaviour, the rest its data."""

    kind: str  # "static", "tarpit", "reset", "stream", "endless"
    status: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    size: int = 0  # "stream": bytes to send after the headers


@dataclass
class HostileWeb:
    """The hostile web for one port: its hosts, seeds and what a correct crawl does with it."""

    port: int
    hosts: dict[str, str]
    seeds: list[str]
    good: set[str]
    good_main: set[str]
    forbidden: set[str]
    redirect_forbidden: set[str]
    session_variants: set[str]
    routes: dict[tuple[str, str], Answer] = field(repr=False)
    generated: dict[str, Callable[[str], Answer | None]] = field(repr=False)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def answer(self, host: str, target: str) -> Answer:
        found = self.routes.get((host, target))
        if found is None and host in self.generated:
            found = self.generated[host](target)
        if found is None and target == "/robots.txt":
            return Answer("static", 404, [(b"Content-Type", b"text/plain")], b"no robots.txt")
        return found or Answer("static", 404, [(b"Content-Type", _HTML)], page("not found"))


def _html(body: bytes, *headers: tuple[bytes, bytes], status: int = 200) -> Answer:
    return Answer("static", status, [(b"Content-Type", _HTML), *headers], body)


def _redirect(location: str) -> Answer:
    return Answer(
        "static",
        302,
        [(b"Location", location.encode()), (b"Content-Type", b"text/plain")],
        b"moved",
    )


@cache  # the model is built twice per server (before and after the port is known)
def _bomb(encoding: str) -> bytes:
    zeros = bytes(1024 * 1024)
    if encoding == "br":
        comp = brotli.Compressor(quality=5)
        out = b"".join(comp.process(zeros) for _ in range(BOMB_BYTES // len(zeros)))
        return out + comp.finish()
    wbits = 31 if encoding == "gzip" else 15
    z = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return b"".join(z.compress(zeros) for _ in range(BOMB_BYTES // len(zeros))) + z.flush()


def build_hostile(port: int, *, bombs: bool = True) -> HostileWeb:
    """The model; ``bombs=False`` skips compressing the bombs (a test that only needs URLs)."""
    u = lambda host, path="/": f"http://{host}:{port}{path}"  # noqa: E731
    routes: dict[tuple[str, str], Answer] = {}
    good: set[str] = set()
    forbidden: set[str] = set()

    def add(host: str, path: str, answer: Answer, *, is_good: bool = False) -> None:
        routes[(host, path)] = answer
        if is_good:
            good.add(u(host, path))

    # main.test: the three socket-level hostile URLs come first on its home page, in a row
    good_paths = [f"/good/{i}.html" for i in range(1, 6)]
    homes = [u(h) for h in HOSTS if h not in ("main.test", "outside.example")]
    add(
        "main.test",
        "/",
        _html(
            page(
                "main",
                [
                    "/tarpit",
                    "/reset",
                    "/giant-header",
                    *good_paths,
                    "/private/secret.html",
                    "/setup.exe",
                    *homes,
                ],
            )
        ),
        is_good=True,
    )
    add(
        "main.test",
        "/robots.txt",
        Answer(
            "static",
            200,
            [(b"Content-Type", b"text/plain")],
            b"User-agent: *\nDisallow: /private/\n",
        ),
    )
    for path in good_paths:
        add("main.test", path, _html(page(path)), is_good=True)
    add("main.test", "/tarpit", Answer("tarpit"))
    add(
        "main.test",
        "/reset",
        Answer(
            "reset",
            200,
            [(b"Content-Type", _HTML), (b"Content-Length", b"100000")],
            b"<html><body>" + b"r" * 5000,
        ),
    )
    add("main.test", "/giant-header", _html(page("giant"), (b"X-Giant", b"g" * 1024 * 1024)))
    forbidden |= {u("main.test", "/private/secret.html"), u("main.test", "/setup.exe")}

    # bombs.test: bodies
    rng = random.Random(14)
    unclosed = "".join(f'<a href="/u{i}' if i % 2 else f"<div class='x{i}" for i in range(20_000))
    cases = {
        "/gzip-bomb": Answer(
            "static",
            200,
            [(b"Content-Type", _HTML), (b"Content-Encoding", b"gzip")],
            _bomb("gzip") if bombs else b"",
        ),
        "/deflate-bomb": Answer(
            "static",
            200,
            [(b"Content-Type", _HTML), (b"Content-Encoding", b"deflate")],
            _bomb("deflate") if bombs else b"",
        ),
        "/br-bomb": Answer(
            "static",
            200,
            [(b"Content-Type", _HTML), (b"Content-Encoding", b"br")],
            _bomb("br") if bombs else b"",
        ),
        "/big.html": Answer("stream", 200, [(b"Content-Type", _HTML)], size=BIG_BYTES),
        "/big.bin": Answer(
            "stream", 200, [(b"Content-Type", b"application/octet-stream")], size=BIG_BYTES
        ),
        "/endless": Answer("endless", 200, [(b"Content-Type", _HTML)]),
        "/random": _html(rng.randbytes(200 * 1024)),
        "/lying-type": Answer(
            "static",
            200,
            [(b"Content-Type", b"image/png")],
            page("a page that says it is a PNG", ["/lie-secret.html"]),
        ),
        "/bad-charset": Answer(
            "static",
            200,
            [(b"Content-Type", b"text/html; charset=x-klingon-42")],
            page("unknown charset", ["/charset-ok.html"]),
        ),
    }
    add("bombs.test", "/", _html(page("bombs", [*cases, "/ok.html"])), is_good=True)
    for path, answer in cases.items():
        add("bombs.test", path, answer)
    add("bombs.test", "/ok.html", _html(page("ok")), is_good=True)
    add("bombs.test", "/charset-ok.html", _html(page("charset ok")), is_good=True)
    forbidden.add(u("bombs.test", "/lie-secret.html"))  # in a body that is never downloaded

    # many.test: 100,000 links (only LARBIN_GATE_PAGES_PER_SITE_MAX of them are queued)
    many = "".join(f'<a href="/l/{i}.html">{i}</a>\n' for i in range(LINKS_ON_MANY))
    many_page = f"<html><body><a href=/unclosed>u</a>{many}</body></html>".encode()
    add("many.test", "/", _html(many_page), is_good=True)
    # 20,000 unclosed tags and quotes (here: each cut quote yields a link, within the budget)
    add("many.test", "/unclosed", _html(unclosed.encode()), is_good=True)

    # storm.test: 429 for every page
    storm = Answer(
        "static", 429, [(b"Content-Type", b"text/plain"), (b"Retry-After", b"1")], b"slow down"
    )
    # Its robots.txt is a 429 too: a polite crawler waits out each Retry-After, then sets the
    # host aside (LARBIN_THROTTLE_IN_A_ROW_MAX) and never fetches its pages: none is "good".
    add("storm.test", "/", _html(page("storm", [f"/s{i}.html" for i in range(10)])))

    # redir.test: loops, a good redirect, and targets a crawler must not follow
    redirect_targets = {
        "/to-exe": u("redir.test", "/payload.exe"),
        "/to-outside": u("outside.example", "/landing.html"),
        "/to-private": u("redir.test", "/private/x.html"),
        "/to-metadata": "http://169.254.169.254/latest/meta-data/",
        "/to-ten": "http://10.1.2.3/",
    }
    redir_links = ["/loop-a", "/self", "/to-good", *redirect_targets]
    add("redir.test", "/", _html(page("redirects", redir_links)), is_good=True)
    add(
        "redir.test",
        "/robots.txt",
        Answer(
            "static",
            200,
            [(b"Content-Type", b"text/plain")],
            b"User-agent: *\nDisallow: /private/\n",
        ),
    )
    add("redir.test", "/loop-a", _redirect("/loop-b"))
    add("redir.test", "/loop-b", _redirect("/loop-a"))
    add("redir.test", "/self", _redirect("/self"))
    add("redir.test", "/to-good", _redirect("/final.html"))
    add("redir.test", "/final.html", _html(page("redirected here")), is_good=True)
    for path, target in redirect_targets.items():
        add("redir.test", path, _redirect(target))
    redirect_forbidden = {
        t for t in redirect_targets.values() if "127.0" in t or ".test" in t or ".example" in t
    }
    for target in redirect_forbidden:  # served, so a request for one shows in the log
        host = target.split("//")[1].split(":")[0]
        routes[(host, target.split(str(port), 1)[1])] = _html(page("must not be here"))

    # traps.test
    sessions = [f"/s.html;jsessionid=SESS{i:04d}" for i in range(5)] + [
        f"/s.html?PHPSESSID=p{i:08d}" for i in range(5)
    ]
    add(
        "traps.test",
        "/",
        _html(page("traps", ["/loop/", "/spiral/", "/deep/", "/cal?day=0", "/sessions.html"])),
        is_good=True,
    )
    add("traps.test", "/sessions.html", _html(page("sessions", sessions)), is_good=True)
    session_variants = {u("traps.test", s) for s in sessions}

    def traps(target: str) -> Answer | None:
        path, _, query = target.partition("?")
        if path == "/cal":
            value = query.removeprefix("day=")
            day = int(value) if value.lstrip("-").isdigit() else 0
            return _html(page(f"day {day}", [f"/cal?day={day + 1}", f"/cal?day={day - 1}"]))
        if path.startswith("/loop/"):
            return _html(page(path, ["x/"]))  # /loop/x/x/x/...
        if path.startswith("/spiral/"):
            return _html(page(path, ["a/b/"]))  # /spiral/a/b/a/b/...
        if path.startswith("/deep/"):
            n = path.count("/")
            return _html(page(path, [f"{n}/"]))  # /deep/2/3/4/...
        if path == "/s.html":
            return _html(page("one page, many session ids"))
        return None

    # endless.test: /gen/N.html links to N+1 and N+2, for ever
    add("endless.test", "/", _html(page("endless", ["/gen/1.html"])), is_good=True)

    def endless(target: str) -> Answer | None:
        if target.startswith("/gen/") and target.endswith(".html"):
            n = target[5:-5]
            if n.isdigit():
                return _html(page(target, [f"/gen/{int(n) + 1}.html", f"/gen/{int(n) + 2}.html"]))
        return None

    # meta.test: robots meta, X-Robots-Tag, rel="nofollow", canonical
    meta_pages = {
        "/nofollow-meta.html": _html(
            page("nofollow", ["/secret-1.html"], '<meta name="robots" content="nofollow">')
        ),
        "/nofollow-bot.html": _html(
            page("none for us", ["/secret-2.html"], '<meta name="larbinscrapy" content="none">')
        ),
        "/nofollow-header.html": _html(
            page("header", ["/secret-3.html"]), (b"X-Robots-Tag", b"nofollow")
        ),
        "/rel.html": _html(
            b'<html><body><a rel="nofollow" href="/secret-4.html">s</a>'
            b'<a href="/after-rel.html">a</a></body></html>'
        ),
        "/noindex.html": _html(page("noindex", [], '<meta name="robots" content="noindex">')),
        "/canonical.html": _html(
            page("canonical", [], '<link rel="canonical" href="/canonical-target.html">')
        ),
    }
    add("meta.test", "/", _html(page("meta", list(meta_pages))), is_good=True)
    for path, answer in meta_pages.items():
        add("meta.test", path, answer, is_good=True)
    for path in ("/after-rel.html", "/canonical-target.html"):
        add("meta.test", path, _html(page(path)), is_good=True)
    forbidden |= {u("meta.test", f"/secret-{i}.html") for i in range(1, 5)}
    for i in range(1, 5):
        add("meta.test", f"/secret-{i}.html", _html(page("secret")))

    generated = {"traps.test": traps, "endless.test": endless, "storm.test": lambda target: storm}
    return HostileWeb(
        port=port,
        hosts=dict(HOSTS),
        seeds=[u("main.test")],
        good=good,
        good_main={u("main.test", p) for p in ["/", *good_paths]},
        forbidden=forbidden,
        redirect_forbidden=redirect_forbidden,
        session_variants=session_variants,
        routes=routes,
        generated=generated,
    )


class HostileProtocol(protocol.Protocol):
    """One connection: read a request head, answer it the hostile way, close (no keep-alive)."""

    MAX_HEAD = 64 * 1024
    transport: Any  # a TCP transport: getHandle(), abortConnection()

    def __init__(self, factory: HostileFactory) -> None:
        self.factory = factory
        self.buffer = b""
        self.answered = False
        self.loop: Any = None

    def dataReceived(self, data: bytes) -> None:
        if self.answered:
            return
        self.buffer += data
        head, sep, _ = self.buffer.partition(b"\r\n\r\n")
        if not sep:
            if len(self.buffer) > self.MAX_HEAD:
                self.transport.loseConnection()
            return
        self.answered = True
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        target = parts[1] if len(parts) > 1 else "/"
        host = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "host":
                host = value.strip().lower().rsplit(":", 1)[0]
        answer = self.factory.web.answer(host, target)
        self.factory.log.write(
            {
                "t": time.time(),
                "ip": self.transport.getHost().host,
                "host": host,
                "path": target,
                "status": answer.status,
                "kind": answer.kind,
            }
        )
        getattr(self, "_" + answer.kind)(answer)

    def _head(self, answer: Answer, extra: list[tuple[bytes, bytes]]) -> bytes:
        lines = [
            b"HTTP/1.1 %d Hostile" % answer.status,
            *(n + b": " + v for n, v in [*answer.headers, *extra]),
        ]
        return b"\r\n".join([*lines, b"Connection: close", b"", b""])

    def _static(self, answer: Answer) -> None:
        extra = (
            []
            if any(n == b"Content-Length" for n, _ in answer.headers)
            else [(b"Content-Length", str(len(answer.body)).encode())]
        )
        self.transport.write(self._head(answer, extra) + answer.body)
        self.transport.loseConnection()

    def _tarpit(self, answer: Answer) -> None:
        """Accept, read, never answer: the client has to give up."""

    def _reset(self, answer: Answer) -> None:
        self.transport.write(self._head(answer, []) + answer.body)
        self.factory.reactor.callLater(0.05, self._send_rst)

    def _send_rst(self) -> None:
        sock = self.transport.getHandle()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abortConnection()

    def _stream(self, answer: Answer) -> None:
        self.transport.write(self._head(answer, [(b"Content-Length", str(answer.size).encode())]))
        self._pump(answer.size, chunked=False)

    def _endless(self, answer: Answer) -> None:
        self.transport.write(self._head(answer, [(b"Transfer-Encoding", b"chunked")]))
        self._pump(None, chunked=True)

    def _pump(self, left: int | None, *, chunked: bool) -> None:
        """Write CHUNK bytes every 10 ms until ``left`` is sent (None: for ever) or peer left."""
        data = b"<p>" + b"z" * (CHUNK - 3)

        def tick() -> None:
            nonlocal left
            if not self.transport.connected:
                return
            piece = data if left is None else data[:left]
            if chunked:
                self.transport.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                self.transport.write(piece)
            if left is not None:
                left -= len(piece)
                if left <= 0:
                    self.transport.loseConnection()
                    return
            self.loop = self.factory.reactor.callLater(0.01, tick)

        tick()

    def connectionLost(self, reason: Any = None) -> None:
        if self.loop is not None and self.loop.active():
            self.loop.cancel()


class HostileFactory(protocol.Factory):
    """Builds one raw-socket protocol per connection, all sharing the web and its log."""

    def __init__(self, web: HostileWeb, log: Any, reactor: Any) -> None:
        self.web = web
        self.log = log
        self.reactor = reactor

    def buildProtocol(self, addr: Any) -> HostileProtocol:
        return HostileProtocol(self)
