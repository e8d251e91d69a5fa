"""Item receipts: a page is acknowledged to the frontier only once its items are stored.

Without this, "done" meant "its outlinks are queued", and a ``kill -9`` lost the items still in
a buffer (the feed exporter's, a pipeline's batch, the content-duplicate journal). Here a page's
items are parts of the page, like its outlinks (``PendingPages``): the link gate counts them
(``request_done(items=K)``); a dropped or failed item is settled at once; an item out of the last
pipeline is settled once the feed files and the registered flushers (``add_flusher``) handed
their buffers to the OS, one flush a reactor turn (or ``LARBIN_ITEM_FLUSH_DELAY``); a pipeline
that stores later holds the item (``hold``) and settles it when stored (``stored``).
So after a ``kill -9`` a page comes back unless its items reached the OS. Feeds of
``BlockingFeedStorage`` (S3, FTP, GCS) are uploaded at close only, as in Scrapy.
Settings: ``LARBIN_ITEM_RECEIPTS`` (False: pages acknowledged when their outlinks are queued),
``LARBIN_ITEM_FLUSH_DELAY``. Stats: ``larbin/items/flush_failed``. Details: docs/modules.md.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal, Protocol

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.extensions.corestats import CoreStats
from scrapy.extensions.feedexport import FeedExporter
from scrapy.utils.asyncio import call_later

from larbinscrapy import meta as M
from larbinscrapy.frontier import frontier_of

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable

    from scrapy.crawler import Crawler
    from scrapy.utils.asyncio import CallLaterResult

logger = logging.getLogger(__name__)


class PageParts(Protocol):
    """What the receipts tell the frontier (``frontier.pending.PendingPages``)."""

    def expect(self, page: Hashable, n: int) -> None:
        """``n`` more parts of ``page`` must arrive before it is acknowledged."""

    def arrived(self, page: Hashable) -> None:
        """One part of ``page`` is settled."""


class Receipt:
    """One pipeline's hold on one item, until the pipeline calls ``ItemReceipts.stored``."""

    __slots__ = ("page", "settled")

    def __init__(self) -> None:
        self.page: Hashable | None = None  # known once the item came out of the pipelines
        self.settled = False


def _page_of(response: Any) -> Hashable | None:
    """The frontier record of the page an item came from (a Response or a Failure)."""
    request = getattr(response, "request", None)
    return None if request is None else request.meta.get(M.RID)


def receipts_of(crawler: Crawler) -> ItemReceipts | None:
    """The crawl's item receipts; None when they are off or the crawler has no extensions
    yet (a component built on its own, in a unit test)."""
    try:
        return crawler.get_extension(ItemReceipts)
    except RuntimeError:
        return None


class ItemReceipts:
    """Settles each item of a page once it is stored (module docstring)."""

    def __init__(self, crawler: Crawler, delay: float) -> None:
        self.crawler = crawler
        self.delay = delay
        self.pages: PageParts | None = None  # the frontier, connected at spider_opened
        self._flushers: list[Callable[[], None]] = []
        self._unbound: dict[int, list[Receipt]] = {}  # id(item) -> holds taken in the pipelines
        self._flushed: list[Hashable] = []  # pages of items waiting for the next flush
        self._call: CallLaterResult | None = None  # the flush scheduled for _flushed
        self._failed_logged = False
        self._feeds: FeedExporter | Literal[False] = False  # found at spider_opened
        self._stock: list[Callable[[Any, Any], None]] = []  # item_scraped receivers taken over

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemReceipts:
        if not crawler.settings.getbool("LARBIN_ITEM_RECEIPTS"):
            raise NotConfigured
        receipts = cls(crawler, crawler.settings.getfloat("LARBIN_ITEM_FLUSH_DELAY"))
        receipts.listen()
        return receipts

    def listen(self) -> None:
        """Connect to the crawl's signals (``from_crawler``; its handlers stay private)."""
        sig = self.crawler.signals
        sig.connect(self._opened, signal=signals.spider_opened)
        sig.connect(self._settled_now, signal=signals.item_dropped)
        sig.connect(self._settled_now, signal=signals.item_error)
        sig.connect(self._closed, signal=signals.spider_closed)

    # -- the API of storage pipelines and of the frontier ---------------------------------
    def hold(self, item: Any) -> Receipt:
        """Called in ``process_item`` by a pipeline that stores ``item`` later: its page is
        not acknowledged before ``stored`` is called with the receipt returned here."""
        receipt = Receipt()
        self._unbound.setdefault(id(item), []).append(receipt)
        return receipt

    def stored(self, receipts: Iterable[Receipt]) -> None:
        """The items of ``receipts`` are stored (committed, flushed): release their pages."""
        for receipt in receipts:
            if receipt.settled:
                continue
            receipt.settled = True
            if receipt.page is not None and self.pages is not None:
                self.pages.arrived(receipt.page)

    def add_flusher(self, flush: Callable[[], None]) -> None:
        """``flush`` hands a component's buffered writes to the OS; called before each
        release (the content-duplicate journal registers its own)."""
        self._flushers.append(flush)

    def connect(self, pages: PageParts) -> None:
        """The frontier counts items as parts of their page from now on."""
        self.pages = pages

    def settle(self) -> None:
        """Flush now and release every item stored so far (the scheduler calls it at close)."""
        self._cancel()
        due, self._flushed = self._flushed, []
        if not due:
            return
        if not self._flush():
            return  # not on disk: the pages stay unacknowledged and are fetched again
        pages = self.pages
        if pages is not None:
            for page in due:
                pages.arrived(page)

    # -- signals ----------------------------------------------------------------------------
    def _opened(self) -> None:
        """Receive ``item_scraped`` in the place of Scrapy's own synchronous receivers.

        Each receiver of ``item_scraped`` costs an asyncio task per item; one receiver calls
        the stats' item count and the feeds' export (Scrapy's methods, untouched: a subclass
        that overrides one keeps its own receiver), then takes the item's receipt.
        The frontier counts a page's items from now on (it opened before ``spider_opened``).
        """
        frontier = frontier_of(self.crawler)
        if frontier is not None:
            frontier.count_items(self)
        self._feeds = self.crawler.get_extension(FeedExporter) or False
        sig = self.crawler.signals
        for component, stock in (
            (self.crawler.get_extension(CoreStats), CoreStats),
            (self._feeds, FeedExporter),
        ):
            if component and type(component).item_scraped is stock.item_scraped:
                sig.disconnect(component.item_scraped, signal=signals.item_scraped)
                self._stock.append(component.item_scraped)
        sig.connect(self._received, signal=signals.item_scraped)

    def _received(self, item: Any, response: Any = None, spider: Any = None) -> None:
        try:
            for receive in self._stock:  # the count first: it never fails
                receive(item, spider)  # a feed's error is logged by Scrapy, as before
        finally:
            self._scraped(item, response)

    def _scraped(self, item: Any, response: Any = None) -> None:
        page = _page_of(response)
        holds = self._unbound.pop(id(item), None)
        if page is None or self.pages is None:
            return
        if holds:
            waiting = [r for r in holds if not r.settled]
            for receipt in waiting:
                receipt.page = page
            if waiting:
                self.pages.expect(page, len(waiting))
        self._flushed.append(page)
        if self._call is None:
            self._call = call_later(self.delay, self._flush_due)

    def _settled_now(self, item: Any, response: Any = None) -> None:
        """Dropped or failed in a pipeline: nothing of it will be stored."""
        self._unbound.pop(id(item), None)
        page = _page_of(response)
        if page is not None and self.pages is not None:
            self.pages.arrived(page)

    def _closed(self) -> None:
        self._cancel()

    def _flush_due(self) -> None:
        self._call = None
        self.settle()

    def _cancel(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None

    # -- flushing ---------------------------------------------------------------------------
    def _flush(self) -> bool:
        """Hand the feed files' and the flushers' buffers to the OS; False if one failed."""
        try:
            for slot in self._feeds.slots if self._feeds else ():
                file = slot.file
                if file is not None and not getattr(file, "closed", False):
                    file.flush()
            for flush in self._flushers:
                flush()
        except (OSError, ValueError) as exc:  # a full disk, a file closed under us
            self.crawler.stats.inc_value("larbin/items/flush_failed")
            if not self._failed_logged:
                self._failed_logged = True
                logger.warning(
                    "Items could not be flushed (%s): their pages stay queued and "
                    "are fetched again after a restart",
                    exc,
                )
            return False
        return True
