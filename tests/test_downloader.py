"""``LeanMiddlewareManager`` gives what Scrapy's downloader-middleware chain gives.

Every shape of middleware a user can write (a method returning nothing, a response, a request,
an awaitable, a Deferred, a wrong type; ``process_exception`` recovering or not) goes through
Scrapy's ``DownloaderMiddlewareManager`` and through ours: the same results, the same calls in
the same order, the same errors and the same deprecation warnings. And a crawl builds ours.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from scrapy.utils.reactor import install_reactor

install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")  # no-op if installed

from scrapy import Request  # noqa: E402
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager  # noqa: E402
from scrapy.exceptions import IgnoreRequest, ScrapyDeprecationWarning  # noqa: E402
from scrapy.http import HtmlResponse  # noqa: E402
from scrapy.utils.test import get_crawler  # noqa: E402
from twisted.internet.defer import succeed  # noqa: E402

from larbinscrapy.lean.downloader import LeanDownloader, LeanMiddlewareManager  # noqa: E402
from settings import base  # noqa: E402
from tests.support.http1 import run  # noqa: E402

URL = "http://127.0.0.1:9/page"
MANAGERS = [DownloaderMiddlewareManager, LeanMiddlewareManager]


def _response(request: Request, tag: str = "downloaded") -> HtmlResponse:
    return HtmlResponse(request.url, body=tag.encode(), request=request)


class Recording:
    """A middleware whose methods answer what ``plan`` says, recording each call."""

    def __init__(self, name: str, calls: list[str], **plan: Any) -> None:
        self.name, self.calls, self.plan = name, calls, plan

    def _answer(self, method: str, default: Any, request: Request) -> Any:
        self.calls.append(f"{self.name}.{method}")
        answer = self.plan.get(method, "default")
        if answer == "default":
            return default
        if answer == "response":
            return _response(request, self.name)
        if answer == "request":
            return Request(URL + "/" + self.name)
        if answer == "coroutine":

            async def later() -> Any:
                await asyncio.sleep(0)
                return default

            return later()
        if answer == "deferred":
            return succeed(default)
        if answer == "raise":
            raise IgnoreRequest(self.name)
        return answer  # a wrong type, as given

    def process_request(self, request: Request) -> Any:
        return self._answer("process_request", None, request)

    def process_response(self, request: Request, response: Any) -> Any:
        return self._answer("process_response", response, request)

    def process_exception(self, request: Request, exception: Exception) -> Any:
        return self._answer("process_exception", None, request)


class AsyncMiddleware:
    """``async def`` methods, as Scrapy 2.19 recommends."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def process_request(self, request: Request) -> None:
        self.calls.append("async.process_request")

    async def process_response(self, request: Request, response: Any) -> Any:
        self.calls.append("async.process_response")
        return response.replace(body=response.body + b"+async")


def _run(
    manager_cls: type, plans: list[dict[str, Any]], download: str = "ok", with_async: bool = False
) -> tuple[Any, list[str], list[str]]:
    """(outcome, calls, warnings) of one request through a chain built from ``plans``."""
    calls: list[str] = []
    middlewares: list[Any] = [Recording(f"m{i}", calls, **plan) for i, plan in enumerate(plans)]
    if with_async:
        middlewares.insert(1, AsyncMiddleware(calls))
    crawler = get_crawler()
    manager = manager_cls(*middlewares, crawler=crawler)
    request = Request(URL)

    async def download_func(req: Request) -> HtmlResponse:
        calls.append("download")
        if download == "fail":
            raise ConnectionRefusedError("refused")
        return _response(req)

    async def go() -> Any:
        try:
            result = await manager.download_async(download_func, request)
        except Exception as exc:  # the outcome is compared, whatever it is
            return ("raised", type(exc).__name__, str(exc))
        if isinstance(result, Request):
            return ("request", result.url)
        return ("response", result.url, result.body)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run(go())
    messages = [str(w.message) for w in caught if issubclass(w.category, ScrapyDeprecationWarning)]
    return outcome, calls, messages


CASES = {
    "all pass": ([{}, {}, {}], "ok"),
    "a middleware answers with a response": ([{}, {"process_request": "response"}, {}], "ok"),
    "a middleware answers with a request": ([{"process_request": "request"}, {}], "ok"),
    "process_response swaps in a request": ([{}, {"process_response": "request"}], "ok"),
    "process_response replaces the response": ([{"process_response": "response"}, {}], "ok"),
    "coroutines": ([{"process_request": "coroutine", "process_response": "coroutine"}, {}], "ok"),
    "a Deferred warns": (
        [{}, {"process_request": "deferred", "process_response": "deferred"}],
        "ok",
    ),
    "process_request returns a wrong type": ([{}, {"process_request": 42}], "ok"),
    "process_response returns None": ([{"process_response": None}], "ok"),
    "process_response returns a wrong type": ([{"process_response": "text"}], "ok"),
    "a download error nobody handles": ([{}, {}], "fail"),
    "process_exception recovers with a response": ([{}, {"process_exception": "response"}], "fail"),
    "process_exception answers with a request": ([{"process_exception": "request"}, {}], "fail"),
    "process_exception returns a wrong type": ([{"process_exception": 3.5}], "fail"),
    "process_exception as a Deferred": ([{"process_exception": "deferred"}], "fail"),
    "process_request raises": ([{}, {"process_request": "raise"}, {}], "ok"),
}


@pytest.mark.parametrize("with_async", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_the_lean_chain_does_what_scrapys_does(case: str, with_async: bool) -> None:
    plans, download = CASES[case]
    scrapys = _run(DownloaderMiddlewareManager, plans, download, with_async)
    ours = _run(LeanMiddlewareManager, plans, download, with_async)
    assert ours == scrapys
    assert scrapys[1]  # the middlewares did run: a chain that skipped them would differ


def test_a_deferred_is_still_named_in_the_warning() -> None:
    _, _, messages = _run(LeanMiddlewareManager, [{}, {"process_request": "deferred"}])
    assert messages == [
        f"{Recording.__module__}.Recording.process_request returned a Deferred, this is "
        "deprecated. Please refactor this function to return a coroutine."
    ]


def test_a_crawl_builds_the_lean_chain_with_every_configured_middleware() -> None:
    settings = {k: v for k, v in vars(base).items() if k.isupper()}
    crawler = get_crawler(settings_dict=settings)
    downloader = LeanDownloader(crawler)
    assert type(downloader.middleware) is LeanMiddlewareManager
    scrapys = DownloaderMiddlewareManager.from_crawler(get_crawler(settings_dict=settings))
    assert [type(m) for m in downloader.middleware.middlewares] == [
        type(m) for m in scrapys.middlewares
    ]
    assert len(downloader.middleware.methods["process_request"]) >= 5
