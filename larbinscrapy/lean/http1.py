"""``LeanHttpDownloadHandler``: http and https over keep-alive connections parsed by llhttp.

Replaces: Scrapy's ``HTTP11DownloadHandler`` (``LARBIN_FETCH_HANDLER``, wrapped by
``PageDeadlineHandler``); ``make conformance`` runs Scrapy's own handler tests against it.
Private names: ``scrapy.utils._download_handlers`` (four helpers), ``twisted.web._newclient``
(``ResponseFailed``, ``ResponseNeverReceived``, ``ParseError``, ``RequestGenerationFailed``),
``twisted.web.http._DataLoss``, ``twisted.web._abnf._istoken``,
``twisted.web.http_headers._nameEncoder``; Scrapy's ``http11`` module, whose behaviour it
reproduces, is compared as a file (``REQUIRES``).
Retire when: Scrapy's HTTP/1.1 client costs about as much per response (an httptools-based
handler upstream would do).

How it behaves like Scrapy's handler, what it raises and its stats: docs/modules.md (lean/).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from functools import partial
from time import monotonic
from typing import TYPE_CHECKING, Any, Protocol, cast

from scrapy import signals
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadFailedError,
    DownloadTimeoutError,
    NotConfigured,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.http import Headers
from scrapy.responsetypes import responsetypes
from scrapy.utils._download_handlers import (
    check_stop_download,
    get_dataloss_msg,
    get_maxsize_msg,
    get_warnsize_msg,
)
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.ssl import _log_ssl_conn_debug_info
from twisted.internet import defer
from twisted.internet.abstract import isIPAddress
from twisted.python.failure import Failure
from twisted.web._newclient import ResponseFailed, ResponseNeverReceived
from twisted.web.http import _DataLoss
from twisted.web.iweb import UNKNOWN_LENGTH

from larbinscrapy import meta as M
from larbinscrapy.lean.http1conn import CONNECTION_CONTROL, Connection, Exchange, request_bytes
from larbinscrapy.lean.http1pool import (
    ConnectionPool,
    Dialer,
    OutOfDescriptors,
    connect_error,
    connections_max,
)
from larbinscrapy.lean.http1tcp import connect_tcp
from larbinscrapy.lean.http1tls import TLSConnection, TLSFactory, TLSSites
from larbinscrapy.lean.perscheme import one_per_crawler
from larbinscrapy.reactor import Reactor, installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IConnector
    from twisted.internet.protocol import ClientFactory

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    ("scrapy.utils._download_handlers", "check_stop_download"),
    ("scrapy.utils._download_handlers", "get_dataloss_msg"),
    ("scrapy.utils._download_handlers", "get_maxsize_msg"),
    ("scrapy.utils._download_handlers", "get_warnsize_msg"),
    ("twisted.protocols.tls", "TLSMemoryBIOProtocol._tlsShutdownFinished", "e78b042366fe"),
    ("twisted.web._newclient", "ResponseFailed"),
    ("twisted.web._newclient", "ResponseNeverReceived"),
    ("twisted.web._newclient", "ParseError"),
    ("twisted.web._newclient", "RequestGenerationFailed"),
    ("twisted.web.http", "_DataLoss"),
    ("twisted.web._abnf", "_istoken", "ba64fc9486b1"),
    ("twisted.web.http_headers", "_nameEncoder"),
    # Scrapy's handler, whose behaviour this one reproduces: any change to it turns this off
    ("scrapy.core.downloader.handlers.http11", "*", "b1b2bb82e718"),
)

logger = logging.getLogger(__name__)

_RETRYABLE = frozenset({b"GET", b"HEAD", b"OPTIONS", b"DELETE", b"TRACE"})
_RETRY = object()  # the outcome of a reused connection closed before any byte: send again
_PORTS = {"http": 80, "https": 443}  # the schemes served here and their default ports


class _NetReactor(Reactor, Protocol):
    """The two reactor calls this handler makes beyond ``Reactor``'s."""

    def resolve(self, name: str) -> Deferred[str]: ...

    def connectTCP(
        self, host: str, port: int, factory: ClientFactory, timeout: float
    ) -> IConnector: ...


class PageRule(Protocol):
    """larbin's page timeout as this handler applies it (``fetch.deadline.EarnedTime``)."""

    def left(self, start: float, base: float, received: int, now: float) -> float | None:
        """Seconds the page still has from ``now``, or None when its time is up."""

    def expired(self, url: str, base: float, received: int) -> DownloadTimeoutError:
        """The error of a page past its deadline."""


class LeanHttpDownloadHandler:
    """Scrapy's HTTP/1.1 download handler, for http and https, on llhttp (module docstring)."""

    lazy = False

    def __init__(
        self,
        crawler: Crawler,
        *,
        timeout: float,
        maxsize: int,
        warnsize: int,
        fail_on_dataloss: bool,
        bind_address: Any,
        max_idle: int,
        idle_timeout: float,
        tls_verbose: bool = False,
        max_connections: int = 0,
        idle_max: int = 0,
    ) -> None:
        if idle_timeout <= 0:
            raise ValueError("LARBIN_FETCH_IDLE_TIMEOUT must be positive")
        self.crawler = crawler
        self.stats = crawler.stats
        self.timeout = timeout
        self.maxsize = maxsize
        self.warnsize = warnsize
        self.fail_on_dataloss = fail_on_dataloss
        self._delegate_all = bool(bind_address) or not is_asyncio_available()
        self._reactor = cast("_NetReactor", installed_reactor())
        cap = connections_max(max_connections)
        pool = ConnectionPool(self._reactor, max(1, max_idle), idle_timeout, cap, idle_max=idle_max)
        self._pool, pool.stats = pool, self.stats
        self._scrapy: Any = None
        self._dataloss_warned = False
        self._earned: PageRule | None = None  # larbin's page timeout, once adopted
        self._tls: TLSSites | None = None  # built on the first https request
        settings = crawler.settings
        if (
            settings["DOWNLOAD_TLS_MIN_VERSION"] is not None
            or settings["DOWNLOAD_TLS_MAX_VERSION"] is not None
        ):
            self._tls = TLSSites(crawler)  # a wrong TLS version fails at start, as in Scrapy's
        self.tls_verbose = tls_verbose
        self._closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeanHttpDownloadHandler:
        """One handler for http and https (``one_per_crawler``): one pool, one cap."""
        s = crawler.settings
        if not s.getbool("TWISTED_REACTOR_ENABLED"):  # as Scrapy's handler says it
            raise NotConfigured(f"{cls.__name__} requires a Twisted reactor.")
        return one_per_crawler(cls, crawler, lambda: cls._build(crawler))

    @classmethod
    def _build(cls, crawler: Crawler) -> LeanHttpDownloadHandler:
        s = crawler.settings
        return cls(
            crawler,
            timeout=s.getfloat("DOWNLOAD_TIMEOUT"),
            maxsize=s.getint("DOWNLOAD_MAXSIZE"),
            warnsize=s.getint("DOWNLOAD_WARNSIZE"),
            fail_on_dataloss=s.getbool("DOWNLOAD_FAIL_ON_DATALOSS"),
            bind_address=s.get("DOWNLOAD_BIND_ADDRESS"),
            max_idle=s.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
            idle_timeout=s.getfloat("LARBIN_FETCH_IDLE_TIMEOUT"),
            tls_verbose=s.getbool("DOWNLOADER_CLIENT_TLS_VERBOSE_LOGGING"),
            max_connections=s.getint("LARBIN_FETCH_CONNECTIONS_MAX"),
            idle_max=s.getint("LARBIN_FETCH_IDLE_MAX"),
        )

    def _delegate(self) -> Any:
        """Scrapy's handler, built once on first need."""
        if self._scrapy is None:
            from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
            from scrapy.utils.misc import build_from_crawler

            self._scrapy = build_from_crawler(HTTP11DownloadHandler, self.crawler)
        return self._scrapy

    def adopt_page_deadline(
        self, rule: PageRule
    ) -> Callable[[Request], Coroutine[Any, Any, Response] | None]:
        """Time the pages served here by larbin's rule (``PageDeadlineHandler`` asks).

        This handler counts each page's bytes anyway, so its one timer per download applies
        the rule: the wrapper needs no timer, no ``bytes_received`` receiver and no Deferred
        round trip of its own for them. Returns ``_served``: the download of a request served
        here, or None for one that goes to Scrapy's handler (the wrapper times those).
        """
        self._earned = rule
        return self._served

    async def download_request(self, request: Request) -> Response:
        served = self._served(request)
        if served is None:
            self.stats.inc_value("larbin/http1/delegated")
            if self._scrapy is None:  # log the first, count them all
                logger.debug(
                    "%s goes to Scrapy's HTTP/1.1 handler (proxy, bind address, "
                    "a scheme other than http(s) or a reactor other than asyncio's)",
                    request,
                )
            return await self._delegate().download_request(request)
        return await served

    def _served(self, request: Request) -> Coroutine[Any, Any, Response] | None:
        """The download of ``request`` here, or None when it is Scrapy's handler's to do."""
        meta = request.meta
        parsed = urlparse_cached(request)
        if (
            self._delegate_all
            or parsed.scheme not in _PORTS
            or meta.get("proxy")
            or meta.get("bindaddress")
        ):
            return None
        return self._download(request, parsed)

    async def _download(self, request: Request, parsed: Any) -> Response:
        host = parsed.hostname or ""
        key = (parsed.scheme, host, parsed.port or _PORTS[parsed.scheme])
        dl = _Download(self, request, float(request.meta.get("download_timeout") or self.timeout))
        data = request_bytes(request, parsed, host, key[2])
        dl.timer = self._reactor.callLater(dl.timeout, dl.expire)
        try:
            outcome = await self._exchange(dl, key, data, retry=not request.body)
            if outcome is _RETRY:
                self.stats.inc_value("larbin/http1/retried")
                dl.reset()  # the latency still counts from the first try, as in Twisted's retry
                outcome = await self._exchange(dl, key, data, retry=False)
        except asyncio.CancelledError:
            dl.abort()
            raise
        finally:
            if dl.timer.active():
                dl.timer.cancel()
        return self._response(dl, outcome)

    async def _exchange(
        self, dl: _Download, key: tuple[str, str, int], data: bytes, retry: bool
    ) -> Any:
        conn = self._pool.take(key)
        if conn is None:
            conn = await self._connect(dl, key)
        elif not (retry and dl.method in _RETRYABLE):
            conn.used = False  # a close before any byte is then no reason to send again
        dl.conn = conn
        conn.send(dl, data, dl.request.meta.get(M.PACER))
        return await dl.wait(dl.answer)

    async def _connect(self, dl: _Download, key: tuple[str, str, int]) -> Connection:
        """A new connection within the pool's cap; one the OS refused for want of descriptors
        (EMFILE) is dialled again once the pool has freed some (the crawl slows, goes on)."""
        while True:
            slot = self._pool.slot()
            try:
                await dl.wait(slot)
            except BaseException:
                self._pool.forfeit(slot)
                raise
            try:
                return cast("Connection", await dl.wait(self._open(dl, key)))
            except OutOfDescriptors:
                self.stats.inc_value("larbin/http1/out_of_descriptors")
                dl.connector = None
                await dl.wait(self._pause(0.1))

    def _pause(self, seconds: float) -> asyncio.Future[None]:
        """A future done after ``seconds`` (a download's ``expire`` can still fail it)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not fut.done():
                fut.set_result(None)

        self._reactor.callLater(seconds, done)
        return fut

    def _open(self, dl: _Download, key: tuple[str, str, int]) -> asyncio.Future[Connection]:
        """A new connection to ``key``'s host: its IP through the reactor's resolver, then TCP
        (and TLS for https)."""
        fut: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        host = key[1]
        if isIPAddress(host):
            self._dial(fut, dl, key, host)
            return fut

        def resolved(ip: str) -> None:
            if fut.done():
                self._pool.release()
            else:
                self._dial(fut, dl, key, ip)

        def unresolved(failure: Failure) -> None:
            self._pool.release()
            if not fut.done():
                fut.set_exception(connect_error(failure.value))

        self._reactor.resolve(host).addCallbacks(resolved, unresolved)
        return fut

    def _dial(
        self, fut: asyncio.Future[Connection], dl: _Download, key: tuple[str, str, int], ip: str
    ) -> None:
        self.stats.inc_value("larbin/http1/connections")
        scheme, host, port = key
        factory: Any
        if scheme == "https":
            if self._tls is None:
                self._tls = TLSSites(self.crawler)
            site = self._tls.site(host, port)
            dialer = Dialer(fut, self._pool, key, partial(TLSConnection, site))
            factory = TLSFactory(site, True, dialer)  # type: ignore[arg-type]
        else:
            factory = Dialer(fut, self._pool, key)
        # under larbin's page timeout its timer ends a connect that takes too long, as it did
        # when PageDeadlineHandler timed every page (counted in larbin/timeout/pages)
        timeout = dl.timeout if self._earned is None else dl.timeout + 1
        dl.connector = connect_tcp(self._reactor, ip, port, factory, timeout)

    def _response(self, dl: _Download, outcome: Any) -> Response:
        if isinstance(outcome, BaseException):
            if isinstance(outcome, ResponseDataLossError) and not self._dataloss_warned:
                logger.warning(get_dataloss_msg(dl.request.url))
                self._dataloss_warned = True
            raise outcome
        url = dl.request.url
        if "#" in url:
            url = url.split("#", 1)[0]
        headers = cast("Headers", dl.scrapy_headers)
        body = b"".join(dl.chunks)
        # Scrapy's make_response, but the response is handed the Headers built from the wire:
        # Response() copies a Headers name by name; its setter keeps the one given.
        response = responsetypes.from_args(headers=headers, url=url, body=body)(
            url=url,
            status=dl.status,
            body=body,
            flags=outcome or None,
            certificate=dl.certificate,
            ip_address=dl.ip_address,
            protocol=dl.version,
        )
        response.headers = headers
        if dl.stopped:
            response.flags.append("download_stopped")
            if dl.stopped.fail:
                dl.stopped.response = response
                raise dl.stopped
        return response

    async def close(self) -> None:
        """Close the pool (Scrapy closes this handler once for each scheme it serves)."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        if self._scrapy is not None:
            closing = self._scrapy.close()
            if inspect.isawaitable(closing):
                await closing


def _scrapy_headers(raw: list[tuple[bytes, bytes]], known: int | None, head_only: bool) -> Headers:
    """The answer's headers as Scrapy's handler shows them: a known length as Content-Length
    first, connection headers left out (a HEAD's Content-Length kept), names title-cased."""
    # name as Headers stores it (title-cased) -> [values, the synthetic length?]
    grouped: dict[bytes, list[Any]] = {}
    if known is not None:
        grouped[b"Content-Length"] = [[str(known).encode()], True]
    control = CONNECTION_CONTROL - {b"content-length"} if head_only else CONNECTION_CONTROL
    for name, value in raw:
        if name.lower() in control:
            continue
        key = name.title()
        entry = grouped.get(key)
        # new, or the synthetic length replaced by a HEAD's own Content-Length (in its place)
        if entry is None or entry[1]:
            grouped[key] = [[value], False]
        else:
            entry[0].append(value)
    # Headers' own storage filled directly, as its normkey/normvalue would fill it, without
    # those two calls a header
    headers = Headers()
    dict.update(headers, {key: entry[0] for key, entry in grouped.items()})
    return headers


class _SizeLimit:
    """A download's ``DOWNLOAD_MAXSIZE`` and ``DOWNLOAD_WARNSIZE``, as Scrapy's handler applies
    them: over the cap, the message to cancel with (logged); over the warning size, one warning."""

    __slots__ = ("maxsize", "warned", "warnsize")

    def __init__(self, maxsize: int, warnsize: int) -> None:
        self.maxsize, self.warnsize, self.warned = maxsize, warnsize, False

    def over(self, size: int, request: Request, *, expected: bool) -> str | None:
        if self.maxsize and size > self.maxsize:
            msg = get_maxsize_msg(size, self.maxsize, request, expected=expected)
            logger.warning(msg)
            return msg
        if self.warnsize and size > self.warnsize and not self.warned:
            self.warned = True
            logger.warning(get_warnsize_msg(size, self.warnsize, request, expected=expected))
        return None


class _Download(Exchange):
    """One request through the lean handler: the exchange's callbacks and the download state."""

    def __init__(self, handler: LeanHttpDownloadHandler, request: Request, timeout: float) -> None:
        super().__init__()
        self.handler = handler
        self.request = request
        self.method = request.method.encode("ascii")
        self.head_only = self.method == b"HEAD"
        self.timeout = timeout
        meta = request.meta
        self.size = _SizeLimit(
            meta.get("download_maxsize", handler.maxsize),
            meta.get("download_warnsize", handler.warnsize),
        )
        self.conn: Connection | None = None
        self.connector: Any = None
        self.waiter: asyncio.Future[Any] | None = None
        self.answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.start = monotonic()  # download_latency's and the page deadline's clock
        self.timer: Any = None
        self.chunks: list[bytes] = []
        self.received = 0
        self.stopped: StopDownload | None = None
        self.scrapy_headers: Headers | None = None
        self.ip_address: Any = None
        self.certificate: Any = None
        self.timed_out = False

    def reset(self) -> None:
        """Ready to send again on a new connection (nothing of an answer came)."""
        start, timer = self.start, self.timer
        self.__init__(self.handler, self.request, self.timeout)  # type: ignore[misc]
        self.start, self.timer = start, timer

    async def wait(self, fut: asyncio.Future[Any]) -> Any:
        self.waiter = fut
        return await fut

    def _settle(self, outcome: Any) -> None:
        if not self.answer.done():
            self.answer.set_result(outcome)

    def expire(self) -> None:
        """The ``download_timeout`` passed: close what is open, fail as Scrapy does.

        Under larbin's page timeout (adopted), the bytes received so far may have earned the
        page more time: the timer is set again for then.
        """
        rule, reactor = self.handler._earned, self.handler._reactor
        if rule is None:
            error = DownloadTimeoutError(
                f"Getting {self.request.url} took longer than {self.timeout} seconds."
            )
        else:
            left = rule.left(self.start, self.timeout, self.received, monotonic())
            if left is not None:
                self.timer = reactor.callLater(left, self.expire)
                return
            error = rule.expired(self.request.url, self.timeout, self.received)
        self.timed_out = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            # first: a dial stopped below fails its waiter too, with the connector's UserError
            waiter.set_exception(error)
        self.abort()

    def abort(self) -> None:
        self.finished = True
        if self.conn is not None:
            self.conn.close()
        elif self.connector is not None:
            self.connector.disconnect()

    # -- Exchange callbacks ------------------------------------------------------------------

    def headers(self) -> bool:
        request = self.request
        request.meta["download_latency"] = monotonic() - self.start
        conn = self.conn
        assert conn is not None
        self.ip_address = conn.ip_address
        if isinstance(conn, TLSConnection):
            self.certificate = conn.certificate
            if self.handler.tls_verbose:
                _log_ssl_conn_debug_info(conn.key[1], conn.transport.getHandle())  # type: ignore[union-attr]
        known = 0 if (self.head_only or self.status in (204, 304)) else self.length
        self.scrapy_headers = headers = _scrapy_headers(self.raw_headers, known, self.head_only)
        handler = self.handler
        stop = check_stop_download(
            signals.headers_received,
            handler.crawler,
            request,
            headers=headers,
            body_length=UNKNOWN_LENGTH if known is None else known,
        )
        if stop is not None:
            self.stopped = stop
            self._settle(None)
            return False
        if known == 0:
            return True
        msg = self.size.over(-1 if known is None else known, request, expected=True)
        if msg is not None:
            self._settle(DownloadCancelledError(msg))
            return False
        return True

    def body(self, data: bytes) -> bool:
        self.chunks.append(data)
        self.received += len(data)
        request = self.request
        stop = check_stop_download(signals.bytes_received, self.handler.crawler, request, data=data)
        if stop is not None:
            self.stopped = stop
            self._settle(None)
            return False
        msg = self.size.over(self.received, request, expected=False)
        if msg is not None:
            self.chunks = []
            err = DownloadCancelledError(msg)
            err.__cause__ = defer.CancelledError()  # Scrapy's cancels its Deferred here
            self._settle(err)
            return False
        return True

    def done(self, partial: bool) -> None:
        self._settle(["partial"] if partial else None)

    def failed(self, reason: Failure, dataloss: bool) -> None:
        if dataloss:
            fail = self.request.meta.get("download_fail_on_dataloss", self.handler.fail_on_dataloss)
            if not fail:
                self._settle(["dataloss"])
                return
            exc = ResponseDataLossError()
            exc.__cause__ = ResponseFailed([reason, Failure(_DataLoss())])
            self._settle(exc)
            return
        conn = self.conn
        if not self.received_any:
            if conn is not None and conn.used:
                self._settle(_RETRY)
                return
            cause: ResponseFailed = ResponseNeverReceived([reason])
        else:
            cause = ResponseFailed([reason])
        err = DownloadFailedError(str(cause))
        err.__cause__ = cause
        self._settle(err)
