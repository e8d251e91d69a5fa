"""What the local and the Redis scheduler share: a request's way into and out of the frontier."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

from larbinscrapy import meta as M
from larbinscrapy import signals as larbin_signals
from larbinscrapy.frontier import codec
from larbinscrapy.frontier.pending import ItemSettlement, PendingPages
from larbinscrapy.gate.urlfilter import parse_extensions
from larbinscrapy.lean.private import wake_engine
from larbinscrapy.lean.request import request_class
from larbinscrapy.parse.urls import extension_of
from larbinscrapy.politeness.ipsites import IpTable, Politeness, politeness_of
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.seen import SeenSet

if TYPE_CHECKING:
    from collections.abc import Hashable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.internet.base import DelayedCall

    from larbinscrapy.frontier import AllWorkers, SharedSitemaps
    from larbinscrapy.politeness import HostRegistry, RobotsCache

logger = logging.getLogger(__name__)


class FrontierScheduler(ABC):
    """Base of ``LarbinScheduler`` and ``RedisScheduler``; they implement ``_enqueue`` (where a
    request is queued) and ``_page_complete`` (how a page's record is acknowledged)."""

    PRIORITY_TIER: int  # the subclass's index of larbin's priority tier...
    NORMAL_TIER: int  # ...and of the normal one
    REQUIRES_GATE = False  # True: refuse to run in a crawl without the send-time gate
    robots: RobotsCache | None = None  # the Redis frontier shares robots.txt between workers
    sitemaps: SharedSitemaps | None = None  # ...and who reads a site's sitemaps
    all_workers: AllWorkers | None = None  # ...and a pause or stop for all of its workers

    def __init__(
        self,
        crawler: Crawler,
        dupefilter: Any,
        *,
        max_per_site: int,
        loaded_sites: int,
        priority_extensions: frozenset[str],
        local_table: IpTable,
    ) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.df = dupefilter
        self.max_per_site = max_per_site
        self.loaded_sites = loaded_sites
        self.priority_extensions = priority_extensions
        self.local_table = local_table  # used when no send-time gate enforces politeness
        self.politeness: HostRegistry
        self.table: IpTable
        self.spider: Spider | None = None
        # Pages whose outlinks are still on their way to the frontier (pending.py).
        self.pending = PendingPages(self._page_complete)
        self.memory_only: deque[Request] = deque()  # requests that cannot be serialised
        self.receipts: ItemSettlement | None = None  # items count as parts of their page
        # meta values JSON cannot hold are pickled into the record (the user opted in)
        self.pickle_meta = crawler.settings.getbool("LARBIN_FRONTIER_PICKLE")
        self._unserializable_logged = False
        self._wakeup: DelayedCall | None = None
        self._request_cls = request_class(crawler.settings)  # SafeUrlRequest under the lean engine

    @staticmethod
    def frontier_settings(crawler: Crawler) -> dict[str, Any]:
        """The keyword arguments of ``__init__`` read from the crawler's settings."""
        s = crawler.settings
        return {
            "dupefilter": build_from_crawler(load_object(s["DUPEFILTER_CLASS"]), crawler),
            "max_per_site": s.getint("LARBIN_FRONTIER_URLS_PER_SITE_MAX"),
            "loaded_sites": s.getint("LARBIN_FRONTIER_LOADED_SITES_MAX"),
            "priority_extensions": parse_extensions(
                s.get("LARBIN_FRONTIER_PRIORITY_EXTENSIONS") or ""
            ),
            "local_table": IpTable.from_settings(s, local=True),
        }

    def _connect(self) -> None:
        """Find the politeness core; listen for the end of each page (to acknowledge it)."""
        enforced = politeness_of(self.crawler)
        if enforced is None and self.REQUIRES_GATE and self._engine() is not None:
            raise NotConfigured(f"{type(self).__name__} needs larbinscrapy's PolitenessMiddleware")
        self.politeness = enforced or Politeness.local(self.local_table, self.stats)
        self.table = self.politeness.table
        sig = self.crawler.signals
        sig.connect(self._request_done, signal=larbin_signals.request_done)
        sig.connect(self._request_dropped, signal=signals.request_dropped)
        if enforced is None:  # otherwise the send-time gate gives leases back
            sig.connect(self._left_downloader, signal=signals.request_left_downloader)

    @property
    def seen(self) -> SeenSet | None:
        """The dupefilter's per-link seen test (``Frontier.seen``), None if it has none."""
        return self.df if isinstance(self.df, SeenSet) else None

    def count_items(self, receipts: ItemSettlement) -> None:
        """Item receipts make a page's items parts of it from now on (their ``spider_opened``)."""
        self.receipts = receipts
        receipts.connect(self.pending)

    def host_set_aside(self, host: str) -> None:
        """``host`` asked for a pause past the cap; a shared frontier tells the other workers."""
        return  # one process: the politeness core already set the host aside

    def _settle_items(self) -> None:
        """At close: flush the stores and acknowledge the pages whose items are in them."""
        if self.receipts is not None:
            self.receipts.settle()

    def _left_downloader(self, request: Request) -> None:
        """Without the send-time gate: the download ended, start the IP's delay."""
        ip = request.meta.pop(M.LEASE, None)
        if ip is not None:
            self.politeness.fetch_ended(ip, release=False, failed=None)
            self.politeness.lease_returned(ip)

    # -- the way in ------------------------------------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        meta = request.meta
        parent = meta.pop(M.PARENT, None)
        previous = meta.get(M.RID)
        if previous is not None:  # a redirect or retry of a request we handed out
            M.clear_trip(meta)
        # a request the politeness gate gave back was admitted before: its seen bit is set
        seen_test = not request.dont_filter and not meta.pop(M.REQUEUED, False)
        held = meta.pop(M.HELD, False)
        try:
            return self._enqueue(request, previous, seen_test=seen_test)
        finally:
            if held:
                self._release()
            if parent is not None:
                self.pending.child_enqueued(parent)

    def _release(self) -> None:
        """The gate's hold on a request's seen bit ends: it is queued (or dropped)."""
        seen = self.seen
        if seen is not None:
            seen.release()

    def _request_dropped(self, request: Request, spider: Spider | None = None) -> None:
        """The engine dropped a request before the scheduler saw it: its hold ends too."""
        if request.meta.pop(M.HELD, False):
            self._release()

    @abstractmethod
    def _enqueue(self, request: Request, previous: Any, *, seen_test: bool) -> bool:
        """Queue ``request``; ``previous`` is the record it replaces (to acknowledge), if any.

        ``seen_test`` False: queue it whatever the seen-set says (``dont_filter``, requeued).
        """

    def _encode(self, request: Request) -> bytes | None:
        """The request's frontier record, or None: kept in memory, it cannot be serialised."""
        try:
            return codec.encode(request, self.spider, allow_pickle=self.pickle_meta)
        except codec.UnserializableRequest as exc:
            self.stats.inc_value("larbin/frontier/unserializable")
            if not self._unserializable_logged:
                self._unserializable_logged = True
                logger.warning(
                    "Keeping %s in memory, it cannot be stored in the frontier "
                    "(%s); further ones are counted in "
                    "larbin/frontier/unserializable",
                    request,
                    exc,
                )
            self.memory_only.append(request)
            return None

    def is_priority(self, request: Request) -> bool:
        """larbin's priority tier: a positive priority, an injected one, a privileged extension."""
        if request.priority > 0 or request.meta.get(M.PRIORITY):
            return True
        return bool(
            self.priority_extensions and extension_of(request.url) in self.priority_extensions
        )

    def _tier(self, request: Request) -> int:
        return self.PRIORITY_TIER if self.is_priority(request) else self.NORMAL_TIER

    # -- the way out -----------------------------------------------------------------------
    def _hand_out(self, record: bytes, rid: Hashable, ip: str) -> Request:
        """The request of a popped ``record``, leased on ``ip`` under the record id ``rid``."""
        request = codec.decode(record, self.spider, self._request_cls)
        M.stamp_lease(request.meta, rid, ip)
        return request

    def _request_done(self, request: Request, children: int = 0, items: int = 0) -> None:
        """``request_done``: the page of ``request`` produced ``children`` requests and
        ``items`` items.

        Its record is acknowledged once all the children reached ``enqueue_request`` and,
        with item receipts, all the items are stored.
        """
        rid = request.meta.get(M.RID)
        if rid is not None:
            self.pending.page_done(rid, children + (items if self.receipts is not None else 0))

    @abstractmethod
    def _page_complete(self, rid: Any) -> None:
        """Every child of the page ``rid`` is queued: acknowledge its record."""

    # -- waking the engine -----------------------------------------------------------------
    def _engine(self) -> Any:
        """The crawl's engine, or None for a scheduler used without one (Scrapy raises)."""
        try:
            return self.crawler.engine
        except RuntimeError:
            return None

    def _wake_engine(self) -> None:
        # Scrapy has no public "scheduler has work again" call (lean/private.py).
        wake_engine(self._engine())

    def _wake_in(self, delay: float) -> None:
        """Wake the engine in ``delay`` seconds (its heartbeat is 5 s, too coarse), or sooner."""
        reactor = installed_reactor()
        if self._wakeup is not None and self._wakeup.active():
            if self._wakeup.getTime() - reactor.seconds() <= delay:
                return
            self._wakeup.cancel()
        self._wakeup = reactor.callLater(max(0.0, delay), self._wake_engine)

    def _cancel_wakeup(self) -> None:
        if self._wakeup is not None and self._wakeup.active():
            self._wakeup.cancel()

    def ip_summary(self) -> dict[str, int]:
        """IPs by state for the status page: dead, throttled (delay raised), fetching, cooling,
        ready. O(IPs): the status page samples it, nothing calls it per request."""
        table = self.table
        now = table.clock()
        counts = dict.fromkeys(("ready", "fetching", "cooling", "throttled", "dead"), 0)
        for st in table.ips.values():
            if st.dead:
                counts["dead"] += 1
            elif table.delay(st) > table.default_delay or st.ready_at - now > table.delay(st):
                counts["throttled"] += 1  # backed off, a robots Crawl-delay, or paused (429)
            elif st.busy:
                counts["fetching"] += 1
            elif st.ready_at > now:
                counts["cooling"] += 1
            else:
                counts["ready"] += 1
        return counts
