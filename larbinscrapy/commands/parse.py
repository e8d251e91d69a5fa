"""``scrapy parse --spider larbin URL``: one page's item and the requests the crawl would queue.

Scrapy's command calls the spider's callback directly, around the spider middlewares, and the
``larbin`` spider yields only the page's item: its links become requests in the link gate
(``LinkGateMiddleware``), so Scrapy's command showed no request. This one runs the item's links
through the crawl's own gate (URL filters, then the seen test) and prints what it lets through;
the item is printed as a feed stores it (``FEED_EXPORT_FIELDS``: no body, no headers). The
URL given is the crawl's start, so the spider needs no seeds (``LARBIN_ALLOW_NO_SEEDS``).
Scrapy's callback wrapper returns a Deferred, which Scrapy 2.19 warns about: here it is awaited.
Installed by ``COMMANDS_MODULE = "larbinscrapy.commands"``; every other command is Scrapy's.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.commands.parse import Command as ScrapyParse
from scrapy.utils import display
from scrapy.utils.defer import maybe_deferred_to_future

from larbinscrapy.items import PageItem
from larbinscrapy.middlewares.gate import LinkGateMiddleware

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Coroutine, Iterable

    from scrapy import Spider
    from scrapy.http import Response
    from scrapy.http.request import CallbackT
    from twisted.internet.defer import Deferred


class Command(ScrapyParse):
    """``scrapy parse``, with the link gate's requests and the item as feeds see it."""

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None  # set by scrapy.cmdline
        self.settings.set("LARBIN_ALLOW_NO_SEEDS", True, priority="cmdline")

    def prepare_request(
        self, spider: Spider, request: Request, opts: argparse.Namespace
    ) -> Request:
        request = super().prepare_request(spider, request, opts)
        request.callback = _awaiting(request.callback)
        return request

    def scraped_data(self, args: tuple[Any, ...]) -> list[Any]:
        data = super().scraped_data(args)
        for obj in data:
            if isinstance(obj, Request) and obj.callback is not None:
                obj.callback = _awaiting(obj.callback)
        return data

    def run_callback(
        self, response: Response, callback: CallbackT, cb_kwargs: dict[str, Any] | None = None
    ) -> Deferred[Any]:
        return (
            super()
            .run_callback(response, callback, cb_kwargs)
            .addCallback(self._through_gate, response)
        )

    def _through_gate(self, output: Iterable[Any], response: Response) -> list[Any]:
        """The callback's output, each page item preceded by the requests its links give."""
        gate = next(
            (
                mw
                for mw in self.pcrawler.engine.scraper.spidermw.middlewares
                if isinstance(mw, LinkGateMiddleware)
            ),
            None,
        )
        result: list[Any] = []
        for obj in output:
            if gate is not None and isinstance(obj, PageItem) and obj.get("links"):
                result += gate.admit(response, obj["links"])
            result.append(obj)
        return result

    def print_items(self, lvl: int | None = None, colour: bool = True) -> None:
        items = (
            [i for level in self.items.values() for i in level]
            if lvl is None
            else self.items.get(lvl, [])
        )
        fields = self.pcrawler.settings.getlist("FEED_EXPORT_FIELDS")
        print("# Scraped Items ", "-" * 60)
        display.pprint([_as_feed(item, fields) for item in items], colorize=colour)


def _awaiting(callback: Any) -> Callable[..., Coroutine[Any, Any, Any]]:
    """Scrapy's callback wrapper (it returns a Deferred) as a coroutine function."""

    @functools.wraps(callback)
    async def wrapper(response: Response, **kwargs: Any) -> Any:
        return await maybe_deferred_to_future(callback(response, **kwargs))

    return wrapper


def _as_feed(item: Any, fields: list[str]) -> dict[str, Any]:
    data = ItemAdapter(item).asdict()
    return {k: data[k] for k in fields if k in data} if fields else data
