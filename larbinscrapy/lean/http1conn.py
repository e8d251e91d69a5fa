"""HTTP/1.1 on the wire for ``http1.py``: a keep-alive client connection parsed by llhttp
(``httptools``), and ``request_bytes``, a request written the way Twisted's ``Agent`` writes it.

Replaces: Twisted's ``HTTP11ClientProtocol`` and ``HTTPClientParser`` (with Scrapy's lenient
parser) for the lean handler. Private names: ``twisted.web._abnf._istoken``,
``twisted.web.http_headers._nameEncoder``, ``twisted.web._newclient.ParseError`` and
``RequestGenerationFailed`` (checked as part of ``http1.py``'s ``REQUIRES``).
Retire when: as ``http1.py``.

More in docs/modules.md (`larbinscrapy/lean/http1conn.py`).
"""

from __future__ import annotations

import logging
import re
import typing
from abc import ABC, abstractmethod
from time import monotonic
from typing import TYPE_CHECKING, Any, NamedTuple

import httptools
from twisted.internet import error as tx
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from twisted.web._abnf import _istoken
from twisted.web._newclient import ParseError, RequestGenerationFailed
from twisted.web.http_headers import _nameEncoder

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

MAX_LINE = 16384  # Twisted's LineReceiver.MAX_LENGTH: a longer head line closes the connection
MAX_FRAMED = 2**63  # llhttp refuses a longer Content-Length: such a body is framed by the close
NO_BODY_CODES = frozenset({204, 304})
INFORMATIONAL = range(100, 200)  # 1xx answers: ignored, the real answer follows (as Twisted)
SWITCHING = 101
DEFAULT_PORT = 80
DEFAULT_TLS_PORT = 443  # https: Host omits it, as Twisted's Agent writes it
_EXPECTS_BODY = frozenset({b"PUT", b"POST"})  # an empty body still gets Content-Length: 0
_VALID_TARGET = re.compile(rb"\A[\x21-\x7e]+\Z")  # Twisted's _ensureValidURI
_PRINTABLE = re.compile(rb"\A[\x20-\x7e]*\Z")
CONNECTION_CONTROL = frozenset(
    {
        b"content-length",
        b"connection",
        b"keep-alive",
        b"te",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-connection",
    }
)


class Exchange(ABC):
    """One request on a connection and the state of its answer; the handler subclasses it."""

    head_only: bool = False  # a HEAD: the answer ends with its headers

    def __init__(self) -> None:
        self.status = 0
        self.version = ""
        self.length: int | None = None  # Content-Length, None when chunked or close-delimited
        self.chunked = False
        self.received_any = False  # a byte of the answer arrived (Twisted's _everReceivedData)
        self.headers_done = False
        self.finished = False
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.conn_close = False

    @abstractmethod
    def headers(self) -> bool:
        """Status and headers are in; False stops the download (the connection is closed)."""

    @abstractmethod
    def body(self, data: bytes) -> bool:
        """A body chunk; False stops the download (the connection is closed)."""

    @abstractmethod
    def done(self, partial: bool) -> None:
        """The whole answer is in (``partial``: close-delimited, Twisted's PotentialDataLoss)."""

    @abstractmethod
    def failed(self, reason: Failure, dataloss: bool) -> None:
        """The answer is lost: ``reason`` as Twisted has it; ``dataloss``: within the body."""


class _Stop(Exception):
    """Raised from a parser callback to stop llhttp: the exchange is over."""


def _parse_error(raised: BaseException | None) -> ParseError:
    """What a parser callback raised, as the ``ParseError`` the exchange fails with."""
    return raised if isinstance(raised, ParseError) else ParseError(str(raised), b"")


class ConnectionOwner(typing.Protocol):
    """Who hears of a connection's life: connected, idle again, gone (``http1pool.Dialer``)."""

    def made(self, conn: Connection) -> None: ...

    def idle(self, conn: Connection) -> None: ...

    def lost(self, conn: Connection) -> None: ...


class Connection(Protocol):
    """An HTTP/1.1 client connection carrying one ``Exchange`` at a time, telling its
    ``owner`` when it is connected, idle again (it may carry another request) and gone."""

    wired = True  # what is written goes out now (over TLS: once the handshake is done)

    def __init__(self, owner: ConnectionOwner) -> None:
        self.owner = owner
        self.exchange: Exchange | None = None
        self.parser: Any = None
        self.head: list[bytes] = []  # the raw bytes of the head so far, for lenient_head
        self.head_bytes: list[bytes] = []  # those of the answer whose head was just read
        self.head_size = 0
        self.scan: _HeadScan | None = None  # only for a head over MAX_LINE or refused by llhttp
        self.long_line = False  # llhttp parsed a head line over MAX_LINE (Twisted would close)
        self.lenient = False  # the head being parsed is lenient_head's clean copy
        self.override: LenientHead | None = None  # that head as read the Twisted way
        self.interim = 0  # 1xx answers read before the final one
        self.switching = False  # the last of them was a 101 (llhttp then pauses)
        self.after_head: bytes | None = None  # a lenient head's body bytes, as received
        self.pending: bytes | None = None  # body bytes for the chunked reader, once it takes over
        self.used = False  # it carried an exchange before: a close before any byte is retried
        self.lost = False
        self.key: Any = None  # the pool's key, (host, port)
        self.ip_address: Any = None  # the peer's address, for Response.ip_address
        self.idle_since = 0.0
        self.on_wire: Callable[[float], None] | None = None  # told when the request goes out

    def went_idle(self) -> None:
        """The answer is complete and the connection may carry another request."""
        self.owner.idle(self)

    def connectionMade(self) -> None:
        self.transport.setTcpNoDelay(True)  # type: ignore[union-attr]
        self.owner.made(self)

    def send(
        self, exchange: Exchange, data: bytes, on_wire: Callable[[float], None] | None = None
    ) -> None:
        """Write the request ``data``; ``on_wire`` is called with the time (``monotonic``) its
        bytes go out: now, or when a TLS handshake still under way is done."""
        self.exchange = exchange
        self.parser = httptools.HttpResponseParser(self)
        self.head = []
        self.head_size = 0
        self.scan = None
        self.long_line = False
        self.lenient = False
        self.override = None
        self.interim = 0
        self.switching = False
        self.after_head = None
        self.pending = None
        transport: Any = self.transport
        transport.write(data)
        if on_wire is not None:
            if self.wired:
                on_wire(monotonic())
            else:
                self.on_wire = on_wire

    def wire_ready(self) -> None:
        """What was written goes out from now (a TLS handshake done)."""
        self.wired = True
        on_wire, self.on_wire = self.on_wire, None
        if on_wire is not None:
            on_wire(monotonic())

    def close(self) -> None:
        """Drop the connection now (a stopped, cancelled or failed download)."""
        self.exchange = None
        if not self.lost:
            self.transport.abortConnection()  # type: ignore[union-attr]

    # -- bytes in ----------------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        ex = self.exchange
        if ex is None or ex.finished:  # bytes nobody asked for: the connection cannot be reused
            self.close()
            return
        ex.received_any = True
        if not ex.headers_done:
            self.head.append(data)
            self.head_size += len(data)
            if self.scan is not None:
                self.scan.add(data)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        ex = self.exchange
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as e:
            # No local names the callback's exception: its traceback's frames link back to
            # this one, and a local here would make a cycle of a dozen frames each answer.
            if not isinstance(e.__context__, _Stop):
                self._fail(Failure(_parse_error(e.__context__)))
            elif self.pending is not None:  # the chunked reader takes the body from here
                rest, self.pending = self.pending, None
                self.parser.feed_data(rest)
            return
        except httptools.HttpParserUpgrade:  # a 101 we did not ask for: an interim answer
            refused = None  # (httptools raises this only with an Upgrade flag llhttp keeps)
        except httptools.HttpParserError as e:
            if ex is None or ex.finished:
                return
            if self.switching:  # llhttp pauses after a 101 (httptools without the offset)
                refused = None
            elif ex.headers_done or self.lenient:
                self._fail(Failure(ParseError(str(e), b"")))
                return
            else:
                refused = True
        else:
            refused = False
        # outside the except block: the next parse's own errors have no context
        if refused is None:
            self._after_switching()
            return
        if refused:
            self._lenient_retry()
            return
        if ex is not None and not ex.headers_done and self._too_long():
            self._fail(Failure(tx.ConnectionDone("head line too long")))

    def _scanned(self) -> _HeadScan:
        if self.scan is None:
            self.scan = _HeadScan()
            for chunk in self.head:
                self.scan.add(chunk)
        return self.scan

    def _too_long(self) -> bool:
        """A head line over Twisted's limit (only looked at once the head is that long)."""
        return self.head_size > MAX_LINE and self._scanned().too_long

    def _lenient_retry(self) -> None:
        """llhttp refused the head: read it as Twisted would, then parse the cleaned head."""
        scan = self._scanned()
        if scan.too_long:
            self._fail(Failure(tx.ConnectionDone("head line too long")))
            return
        end = scan.end
        if end is None:  # the head is not complete yet: wait for more
            self.parser = _WaitForHead(self)
            return
        raw = bytes(scan.buf)
        ex = self.exchange
        assert ex is not None
        try:
            head = lenient_head(raw[:end], head_only=ex.head_only)
        except ParseError as e:
            self._fail(Failure(e))
            return
        ex.raw_headers = []
        self.parser = httptools.HttpResponseParser(self)
        self.lenient = True
        self.override = head
        self.after_head = raw[end:]
        self._feed(head.framing + raw[end:])

    # -- llhttp callbacks --------------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        if len(reason) > MAX_LINE:
            self.long_line = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.override is not None:  # the framing copy of a lenient head: not the headers
            return
        if len(name) + len(value) > MAX_LINE:  # the line is longer still (": ", spaces, CRLF)
            self.long_line = True
        self.exchange.raw_headers.append((name, value.strip()))  # type: ignore[union-attr]

    def on_headers_complete(self) -> None:
        ex = self.exchange
        assert ex is not None
        parser = self.parser
        head, self.override = self.override, None
        if head is None:
            status = parser.get_status_code()
            version = "HTTP/" + parser.get_http_version()
        else:
            status, version, ex.raw_headers = head.status, head.version, list(head.fields)
        if status in INFORMATIONAL:
            ex.raw_headers = []
            self.interim += 1
            self.switching = status == SWITCHING and head is None
            return
        no_body = ex.head_only or status in NO_BODY_CODES
        if not no_body:
            for name, value in ex.raw_headers:
                lname = name.lower()
                if lname == b"transfer-encoding":
                    if not ex.chunked and value.lower() != b"chunked":  # Twisted knows no other
                        raise ParseError("unknown Transfer-Encoding", value)
                    ex.chunked = True
                elif lname == b"content-length":
                    ex.length = _content_length(value, ex.length)
            if ex.chunked:
                ex.length = None
        ex.status = status
        ex.version = version
        ex.conn_close = not parser.should_keep_alive()
        if self.long_line:
            raise ParseError("head line too long", b"")
        ex.headers_done = True
        self.head_bytes, self.head = self.head, []
        if not ex.headers():
            self.close()
            raise _Stop
        if no_body or ex.length == 0:
            self._complete(partial=False)
            raise _Stop
        if ex.chunked:  # framed as Twisted frames it (llhttp refuses "66;" and bad trailers)
            self.pending = self._body_so_far()
            self.parser = _Chunked(self)
            raise _Stop

    def _after_switching(self) -> None:
        """A 101 to a request that asked for no upgrade is one more interim answer (RFC 9110
        15.2: a client parses any 1xx before the final answer; Twisted skips them all): the
        bytes after its head are parsed as the answer."""
        self.switching = False
        self.parser = httptools.HttpResponseParser(self)
        self._feed(_after_heads(b"".join(self.head), self.interim))

    def _body_so_far(self) -> bytes:
        """The bytes received after the final answer's head."""
        if self.after_head is not None:
            return self.after_head
        return _after_heads(b"".join(self.head_bytes), self.interim + 1)

    def on_body(self, data: bytes) -> None:
        ex = self.exchange
        if ex is None:
            raise _Stop
        if not ex.body(data):
            self.close()
            raise _Stop

    def on_message_complete(self) -> None:
        ex = self.exchange
        if ex is None or not ex.headers_done:
            return
        self._complete(partial=False)
        raise _Stop

    # -- endings -----------------------------------------------------------------------------

    def _complete(self, partial: bool) -> None:
        ex = self.exchange
        assert ex is not None
        ex.finished = True
        self.exchange = None
        self.used = True
        # nothing of this answer stays on the connection while it waits idle: the socket
        # read its head came in (up to 64 KB) is the largest thing it would hold
        self.head_bytes, self.head = [], []
        self.after_head = self.pending = None
        if ex.conn_close or partial or self.lost:
            self.close()
        else:
            self.went_idle()
        ex.done(partial)

    def _fail(self, reason: Failure) -> None:
        """A malformed answer: drop the connection, tell the exchange."""
        ex = self.exchange
        self.close()
        if ex is not None and not ex.finished:
            ex.finished = True
            ex.failed(reason, dataloss=ex.headers_done)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost = True
        self.on_wire = None  # never sent: nothing to tell
        self.parser = None  # it names this connection: no cycle left for the collector
        ex = self.exchange
        self.exchange = None
        self.owner.lost(self)
        if ex is None or ex.finished:
            return
        if ex.headers_done and not ex.chunked and ex.length is None:
            self.exchange = ex
            self._complete(partial=True)  # close-delimited: Twisted's PotentialDataLoss
            return
        ex.finished = True
        ex.failed(reason, dataloss=ex.headers_done)


def _after_heads(raw: bytes, heads: int) -> bytes:
    """``raw`` after its first ``heads`` heads (llhttp accepted them: CRLF line ends)."""
    end = 0
    for _ in range(heads):
        end = raw.index(b"\r\n\r\n", end) + 4
    return raw[end:]


_CHUNK_SIZE = re.compile(rb"[0-9a-fA-F]+")
_CHUNK_EXT = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")  # Twisted's _chunkExtChars
MAX_CHUNK_LINE = 1024  # Twisted's maxChunkSizeLineLength
MAX_TRAILERS = 2**16  # Twisted's limit on the trailer lines


class _Chunked:
    """A chunked body read as Twisted's ``_ChunkedTransferDecoder`` reads it, standing in for
    llhttp once the head is read: a chunk size, then anything of the extensions' characters
    after a ";" (``66;``: RFC 9112 asks for a name, Twisted and Scrapy's handler take it, and
    ignoring an extension loses nothing), CRLF after each chunk, and trailer lines up to an
    empty one, dropped unread (a malformed one too: the body is complete, and neither handler
    keeps trailers). What Twisted refuses is data loss, as before."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.buf = bytearray()
        # the step to run next, a function of this reader (a bound method would be a cycle)
        self.state: Callable[[_Chunked], bool] = _Chunked._size
        self.left = 0
        self.trailers = 0

    def feed_data(self, data: bytes) -> None:
        self.buf += data
        try:
            while self.conn.exchange is not None and self.state(self):
                pass
        except ParseError as e:
            self.conn._fail(Failure(e))

    def _line(self, limit: int) -> int | None:
        eol = self.buf.find(b"\r\n")
        if eol >= limit or (eol == -1 and len(self.buf) > limit):
            raise ParseError("chunk line too long", b"")
        return None if eol == -1 else eol

    def _size(self) -> bool:
        eol = self._line(MAX_CHUNK_LINE)
        if eol is None:
            return False
        size, _, ext = bytes(self.buf[:eol]).partition(b";")
        if _CHUNK_SIZE.fullmatch(size) is None or _CHUNK_EXT.fullmatch(ext) is None:
            raise ParseError("bad chunk size line", bytes(self.buf[:eol]))
        self.left = int(size, 16)
        del self.buf[: eol + 2]
        self.state = _Chunked._data if self.left else _Chunked._trailer
        return True

    def _data(self) -> bool:
        if not self.buf:
            return False
        part = bytes(self.buf[: self.left])
        del self.buf[: len(part)]
        self.left -= len(part)
        if self.left == 0:
            self.state = _Chunked._crlf
        ex = self.conn.exchange
        if ex is not None and not ex.body(part):
            self.conn.close()
            return False
        return True

    def _crlf(self) -> bool:
        if len(self.buf) < 2:  # noqa: PLR2004 - CR LF
            return False
        if self.buf[:2] != b"\r\n":
            raise ParseError("chunk not ended by CRLF", b"")
        del self.buf[:2]
        self.state = _Chunked._size
        return True

    def _trailer(self) -> bool:
        eol = self._line(MAX_TRAILERS - self.trailers)
        if eol is None:
            return False
        del self.buf[: eol + 2]
        self.trailers += eol + 2
        if eol == 0:  # the empty line: the answer is complete
            ex = self.conn.exchange
            if ex is not None:
                ex.conn_close = ex.conn_close or bool(self.buf)  # bytes after it: not reusable
                self.conn._complete(partial=False)
            return False
        return True


class _WaitForHead:
    """Stands in for the parser while an incomplete head that llhttp refused waits for bytes."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def feed_data(self, data: bytes) -> None:
        self.conn._lenient_retry()


class _HeadScan:
    """A head's bytes scanned once, chunk by chunk: a line over MAX_LINE, where the head ends."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.line_start = 0
        self.too_long = False
        self.end: int | None = None  # the offset just past the blank line (CRLF or bare LF)

    def add(self, data: bytes) -> None:
        buf = self.buf
        pos = len(buf)
        buf += data
        while self.end is None and not self.too_long:
            nl = buf.find(b"\n", pos)
            if nl < 0:
                self.too_long = len(buf) - self.line_start > MAX_LINE
                return
            length = nl - self.line_start
            if length > MAX_LINE:
                self.too_long = True
            elif self.line_start and (length == 0 or (length == 1 and buf[nl - 1] == 13)):  # noqa: PLR2004 - a lone CR
                self.end = nl + 1
            self.line_start = pos = nl + 1


class LenientHead(NamedTuple):
    """A response head read the Twisted way: what the answer says, and a head for llhttp that
    only frames the body (status class, length or chunked, Connection)."""

    status: int
    version: str  # as Scrapy's ``Response.protocol`` shows it: "<proto>/<major>.<minor>"
    fields: list[tuple[bytes, bytes]]
    framing: bytes


def lenient_head(head: bytes, *, head_only: bool = False) -> LenientHead:
    """A response head read as Twisted's client and Scrapy's lenient parser read it;
    ``ParseError`` where Twisted would fail too."""
    lines = [line.removesuffix(b"\r") for line in head.split(b"\n")]
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise ParseError("wrong number of parts", b"")
    status_line, rest = lines[0], lines[1:]
    parts = status_line.split(b" ", 2)
    if len(parts) not in (2, 3):
        raise ParseError("wrong number of parts", status_line)
    version = _version(parts[0])
    try:
        status = int(parts[1])
    except ValueError:
        raise ParseError("non-integer status code", status_line) from None
    fields = _fields(rest)
    framing = [b"HTTP/1.%d %d X" % (version[1] >= (1, 1), status if 100 <= status <= 999 else 200)]  # noqa: PLR2004 - three digits
    chunked = any(n.lower() == b"transfer-encoding" for n, _ in fields)
    if chunked:
        framing.append(b"Transfer-Encoding: chunked")
    elif not (head_only or status in NO_BODY_CODES):  # Twisted reads no length for those
        length: int | None = None
        for name, value in fields:
            if name.lower() == b"content-length":
                length = _content_length(value, length)
        if length is not None and length < MAX_FRAMED:
            framing.append(b"Content-Length: %d" % length)
    framing += [
        b"Connection: " + v for n, v in fields if n.lower() == b"connection" and _PRINTABLE.match(v)
    ]
    return LenientHead(status, version[0], fields, b"\r\n".join(framing) + b"\r\n\r\n")


def _version(text: bytes) -> tuple[str, tuple[int, int]]:
    """Twisted's ``parseVersion``: ``proto/major.minor``, any proto, numbers not negative."""
    try:
        proto, number = text.split(b"/")
        major, minor = (int(n) for n in number.split(b"."))
    except ValueError:
        raise ParseError("wrong version", text) from None
    if major < 0 or minor < 0:
        raise ParseError("wrong version", text)
    return f"{proto.decode('latin-1')}/{major}.{minor}", (major, minor)


def _fields(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """Header lines as Twisted reads them: folded lines joined, a line without a colon skipped,
    a bad name refused, a CR inside a value a space (``Headers`` sanitises it)."""
    partial: list[bytes] | None = None
    fields: list[tuple[bytes, bytes]] = []
    for line in [*lines, b""]:
        if line and line[0] in b" \t" and partial is not None:
            partial.append(line)
            continue
        if partial is not None:
            header = b"".join(partial)
            if b":" in header:
                name, value = header.split(b":", 1)
                if not _istoken(name):  # Twisted's Headers refuse it: the answer fails
                    raise ParseError("invalid header name", name)
                fields.append((name, value.strip().replace(b"\r", b" ")))
            else:
                logger.debug(
                    "Skipping the bad response header line %r, as it has no colon.", header
                )
        partial = [line] if line else None
    return fields


def _content_length(value: bytes, before: int | None) -> int:
    """A Content-Length value as Twisted's ``_contentLength`` reads it (``42, 42`` allowed;
    digits only: ``+2`` and ``1_0`` are refused, as ``_decint`` refuses them)."""
    values = {_decint(v) for v in value.split(b",")}
    if before is not None:
        values.add(before)
    if len(values) != 1:
        raise ParseError("conflicting or invalid Content-Length", value)
    return values.pop()


def _decint(value: bytes) -> int:
    digits = value.strip(b" \t")
    if not digits.isdigit() or not digits.isascii():
        raise ParseError("invalid Content-Length", value)
    return int(digits)


def request_bytes(request: Any, parsed: Any, host: str, port: int) -> bytes:
    """The request head and body exactly as Twisted's ``Agent`` writes them."""
    target = (parsed.path or "/").encode("ascii")
    if parsed.params:
        target += b";" + parsed.params.encode("ascii")
    if parsed.query:
        target += b"?" + parsed.query.encode("ascii")
    method = request.method.encode("ascii")
    if not _VALID_TARGET.match(target) or not _VALID_TARGET.match(method):
        raise RequestGenerationFailed([Failure(ValueError(f"Invalid URI {target!r}"))])
    lines = [method + b" " + target + b" HTTP/1.1\r\n"]
    body = request.body
    if body:
        lines.append(b"Content-Length: %d\r\n" % len(body))
    elif method in _EXPECTS_BODY:
        lines.append(b"Content-Length: 0\r\n")
    has_host = False
    # dict.items: the stored (normalised) names and value lists; Headers.items() normalises
    # every name again and looks each one up.
    for name, values in dict.items(request.headers):
        cname = _nameEncoder.encode(name)
        if cname == b"Host":
            has_host = True
        for value in values:
            if b"\n" in value or b"\r" in value:
                value = b" ".join(value.splitlines())  # noqa: PLW2901
            lines.append(cname + b": " + value + b"\r\n")
    if not has_host:
        hostb = host.encode("ascii")
        if ":" in host:
            hostb = b"[" + hostb + b"]"
        if port != (DEFAULT_TLS_PORT if parsed.scheme == "https" else DEFAULT_PORT):
            hostb = b"%b:%d" % (hostb, port)
        lines.append(b"Host: " + hostb + b"\r\n")
    lines.append(b"\r\n")
    if body:
        lines.append(body)
    return b"".join(lines)
