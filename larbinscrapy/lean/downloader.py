"""Scrapy's downloader, its middleware chain without a coroutine per layer and per request.

Scrapy's ``DownloaderMiddlewareManager`` passes the value of every middleware method through
``ensure_awaitable`` (a new coroutine around a plain ``None`` or response) and formats the
method's import path for a warning it almost never gives, on every call: ~1-1.2 us a method
a request here (an empty chain costs 0.34 us a request, eight middlewares with both methods
16-20 us; this chain 4.2 us). A page of larbinscrapy's crawl passes 9 ``process_request`` and
7 ``process_response`` methods. ``LeanMiddlewareManager`` uses a method's value as it is when
it is already what Scrapy would get from awaiting it (``None``, a ``Response``, a ``Request``),
and hands anything else to Scrapy's own ``ensure_awaitable`` (coroutines, Futures, Deferreds
with Scrapy's deprecation warning). The order, the short cuts (a response or a request from a
middleware), the checks and their error messages are Scrapy's 2.19 ones;
``tests/test_downloader.py`` runs each shape through both managers.

Scrapy builds the manager inside ``Downloader.__init__`` with no setting to name another
class; ``LeanMiddlewareManager`` adds no state and overrides only the three chain methods, so
``LeanDownloader`` gives the instance Scrapy built that class. A subclass of Scrapy's manager
(someone else's downloader) is left as it is.

Settings: ``DOWNLOADER``.
"""

from __future__ import annotations

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
        if type(self.middleware) is DownloaderMiddlewareManager:
            self.middleware.__class__ = LeanMiddlewareManager
