"""``ConditionalGetMiddleware``: revisits ask "changed since?", and every fetch is scheduled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import maybe_deferred_to_future

from larbinscrapy import meta as M
from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.revisit.extension import RevisitExtension
from larbinscrapy.revisit.observe import NOT_MODIFIED, conditional_headers
from larbinscrapy.stopping import CrawlStopping

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

STALE = "revisit_stale"


class ConditionalGetMiddleware:
    """Conditional GET on revisits; reports each page's outcome to ``RevisitExtension``."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.revisits: RevisitExtension | None = None
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ConditionalGetMiddleware:
        if not crawler.settings.getbool("LARBIN_REVISIT"):
            raise NotConfigured
        return cls(crawler)

    def _spider_opened(self) -> None:
        self.revisits = self.crawler.get_extension(RevisitExtension)
        if self.revisits is None:
            raise NotConfigured("ConditionalGetMiddleware needs RevisitExtension in EXTENSIONS")

    def process_request(
        self, request: Request, spider: Any = None
    ) -> Coroutine[Any, Any, None] | None:
        """Nothing for a first fetch; a revisit waits for the schedule's word (a coroutine)."""
        token = request.meta.get(M.REVISIT)
        if token is None or self.revisits is None:
            return None
        return self._revisit(request, token, self.revisits)

    async def _revisit(self, request: Request, token: str, revisits: RevisitExtension) -> None:
        """Drop a stale copy before it reaches the server; ask "changed since?" of a due one."""
        entry = await maybe_deferred_to_future(revisits.due_entry(token))
        if entry is None:
            raise DroppedRequest(STALE, request.url)
        validators = conditional_headers(entry)
        if request.url != entry.url:  # a redirect's target: the page's validators are not its own
            for name in validators:
                request.headers.pop(name, None)
            return
        for name, value in validators.items():
            request.headers.setdefault(name, value)
        statuses = request.meta.get(M.HANDLE_HTTPSTATUS_LIST)
        if statuses is None or NOT_MODIFIED not in statuses:
            request.meta[M.HANDLE_HTTPSTATUS_LIST] = [*(statuses or ()), NOT_MODIFIED]

    async def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        # awaited: the schedule is written before the spider (and so the frontier's ack) runs
        if self.revisits is not None and request.callback is not NO_CALLBACK:
            await maybe_deferred_to_future(self.revisits.fetched(request, response))
        return response

    async def process_exception(
        self, request: Request, exception: Exception, spider: Any = None
    ) -> None:
        token = request.meta.get(M.REVISIT)
        if token is None or self.revisits is None:
            return
        if isinstance(exception, DroppedRequest) and exception.reason == STALE:
            return
        if isinstance(exception, CrawlStopping):  # never sent: the resumed crawl fetches it
            return
        await maybe_deferred_to_future(self.revisits.failed(token))
