"""What the local and the Redis scheduler share: a request's way into the frontier.

Both schedulers take a request the same way: the meta of its last trip through the downloader
is dropped (a redirect or retry of a request they handed out), the page that produced it is told
its child arrived (``PendingPages``), and its tier is chosen by larbin's rules. Only where the
record goes differs (``_enqueue``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from larbinscrapy.urls import extension_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from larbinscrapy.frontier.pending import PendingPages

# Meta keys that belong to one trip through the downloader, never to a re-queued request.
TRIP_META = (
    "larbin_lease",
    "larbin_rid",
    "larbin_ip",
    "larbin_sent",
    "larbin_own",
    "larbin_borrow",
    "download_slot",
)


class FrontierScheduler:
    """Base of ``LarbinScheduler`` and ``RedisScheduler``; subclasses implement ``_enqueue``."""

    crawler: Crawler
    pending: PendingPages
    priority_extensions: frozenset[str]

    def enqueue_request(self, request: Request) -> bool:
        meta = request.meta
        parent = meta.pop("larbin_parent", None)
        previous = meta.get("larbin_rid")
        if previous is not None:  # a redirect or retry of a request we handed out
            for key in TRIP_META:
                meta.pop(key, None)
        try:
            return self._enqueue(request, previous)
        finally:
            if parent is not None:
                self.pending.child_enqueued(parent)

    def _enqueue(self, request: Request, previous: Any) -> bool:
        """Queue ``request``; ``previous`` is the record it replaces (to acknowledge), if any."""
        raise NotImplementedError

    def is_priority(self, request: Request) -> bool:
        """larbin's priority tier: a positive priority, an injected one, a privileged extension."""
        if request.priority > 0 or request.meta.get("larbin_priority"):
            return True
        return bool(self.priority_extensions
                    and extension_of(request.url) in self.priority_extensions)

    def _engine(self) -> Any:
        """The crawl's engine, or None for a scheduler used without one (Scrapy raises)."""
        try:
            return self.crawler.engine
        except RuntimeError:
            return None

    def _wake_engine(self) -> None:
        # Scrapy has no public "scheduler has work again" call; the engine's own crawl() uses
        # this same CallLaterOnce after an enqueue.
        slot = getattr(self._engine(), "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()
