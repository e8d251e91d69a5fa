"""Scrapy's downloader, its middleware chain without a coroutine per layer and per request.

Replaces: ``DownloaderMiddlewareManager`` (``DOWNLOADER``: ``LeanDownloader`` builds
``LeanMiddlewareManager`` from the middlewares Scrapy's ``Downloader`` built). Scrapy passes the
value of every middleware method through ``ensure_awaitable`` and formats the method's name for a
warning it almost never gives, on every call; this chain uses a value as it is when it is already
what awaiting it would give (``None``, a ``Response``, a ``Request``) and hands anything else to
Scrapy's own ``ensure_awaitable``. Order, short cuts, checks and error messages are Scrapy's
(``tests/test_downloader.py`` runs each shape through both; ``make conformance`` runs Scrapy's
own tests of the manager and the downloader against these classes).
Private names: ``DownloaderMiddlewareManager._process_request``, ``_process_response``,
``_process_exception`` (overridden, their source checked), ``_handle_mw_method``,
``scrapy.exceptions._InvalidOutput``.
Retire when: Scrapy skips ``ensure_awaitable`` for plain values itself, or lets a setting name
the manager class (``Downloader`` builds ``DownloaderMiddlewareManager`` by name).
"""

from __future__ import annotations

from types import CoroutineType
from typing import TYPE_CHECKING, Any

from scrapy.core.downloader import Downloader
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.exceptions import _InvalidOutput
from scrapy.http import Request, Response
from scrapy.utils.defer import ensure_awaitable
from scrapy.utils.python import global_object_name

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    (
        "scrapy.core.downloader.middleware",
        "DownloaderMiddlewareManager._process_request",
        "f2b83efff7fc",
    ),
    (
        "scrapy.core.downloader.middleware",
        "DownloaderMiddlewareManager._process_response",
        "d94bf8a9c519",
    ),
    (
        "scrapy.core.downloader.middleware",
        "DownloaderMiddlewareManager._process_exception",
        "45cd05273bb7",
    ),
    (
        "scrapy.core.downloader.middleware",
        "DownloaderMiddlewareManager._handle_mw_method",
        "0efff254fbd8",
    ),
    ("scrapy.exceptions", "_InvalidOutput"),
)

_OUTPUT = (Response, Request)


class LeanMiddlewareManager(DownloaderMiddlewareManager):
    """Scrapy's manager; a method's plain value is not wrapped in a coroutine to be awaited."""

    async def _process_request(
        self,
        request: Request,
        download_func: Callable[[Request], Coroutine[Any, Any, Response]],
    ) -> Response | Request:
        for method in self.methods["process_request"]:
            assert method is not None
            response = self._handle_mw_method(method, request=request)
            if response is not None and not isinstance(response, _OUTPUT):
                response = await _settled(response, method, none=True, got=_class_name)
            if response:
                return response
        return await download_func(request)

    async def _process_response(
        self, response: Response | Request, request: Request
    ) -> Response | Request:
        if response is None:
            raise TypeError("Received None in process_response")
        if isinstance(response, Request):
            return response
        for method in self.methods["process_response"]:
            assert method is not None
            result: Any = self._handle_mw_method(method, request=request, response=response)
            if not isinstance(result, _OUTPUT):
                result = await _settled(result, method, none=False, got=type)
            if isinstance(result, Request):
                return result
            response = result
        return response

    async def _process_exception(
        self, exception: Exception, request: Request | Response
    ) -> Response | Request:
        for method in self.methods["process_exception"]:
            assert method is not None
            response = self._handle_mw_method(method, request=request, exception=exception)
            if response is not None and not isinstance(response, _OUTPUT):
                response = await _settled(response, method, none=True, got=type)
            if response:
                return response
        raise exception


def _class_name(value: Any) -> str:
    return str(value.__class__.__name__)


async def _settled(
    value: Any, method: Callable[..., Any], *, none: bool, got: Callable[[Any], object]
) -> Any:
    """Scrapy's await and check of a method's value that is not a plain one.

    ``ensure_awaitable`` warns about a Deferred, naming ``method``; the messages of a wrong
    value are Scrapy's (``got`` says how each method's message shows the value's type).
    """
    if type(value) is CoroutineType:  # the common case: Scrapy would await it as it is
        value = await value
    else:
        value = await ensure_awaitable(value, _warn=global_object_name(method))
    if isinstance(value, _OUTPUT) or (none and value is None):
        return value
    allowed = "None, Response or Request" if none else "Response or Request"
    raise _InvalidOutput(
        f"Middleware {method.__qualname__} must return {allowed}, got {got(value)}"
    )


class LeanDownloader(Downloader):
    """Scrapy's ``Downloader`` with ``LeanMiddlewareManager`` as its middleware chain."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # Scrapy's __init__ builds its manager by name; ours takes the same middleware instances
        # (built once, as Scrapy built them) through the manager's public constructor.
        if type(self.middleware) is DownloaderMiddlewareManager:
            self.middleware = LeanMiddlewareManager(*self.middleware.middlewares, crawler=crawler)
