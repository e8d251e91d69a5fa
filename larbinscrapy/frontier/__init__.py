"""larbin's frontier: disk segment FIFOs, per-site and per-IP queues, the scheduler.

``Frontier`` is what the other components may ask of the crawl's scheduler (both larbinscrapy
schedulers are one, through ``FrontierScheduler``); they find it once, in ``from_crawler`` or at
``spider_opened``, with ``frontier_of(crawler)``, and never reach past it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy.core.scheduler import Scheduler

from larbinscrapy.seen import SeenSet

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from larbinscrapy.frontier.pending import ItemSettlement
    from larbinscrapy.politeness import RobotsCache

__all__ = ["AllWorkers", "Frontier", "SharedSitemaps", "frontier_of", "seen_set_of"]


class SharedSitemaps(Protocol):
    """A frontier shared by workers (Redis): one reader a site, each fetch under the IP lease."""

    async def claim(self, site: str) -> bool:
        """True when this worker reads ``site``'s sitemaps (no other worker took them)."""

    async def take_ip(self, url: str) -> str:
        """The IP of ``url``'s host with one of its connections leased to this worker."""


class AllWorkers(Protocol):
    """A frontier shared by workers: one command (``pause``, ``resume``, ``stop``) for every
    worker of the crawl, asked of any of them; each applies it (``signals.crawl_command``)."""

    @property
    def command(self) -> str:
        """The last command asked of every worker, "" before any."""

    @property
    def kept(self) -> str:
        """Where the queue stays when the workers stop, and how to go on (for messages)."""

    def ask(self, command: str) -> None:
        """Ask every worker (this one at once, the others at their next heartbeat)."""


@runtime_checkable
class Frontier(Protocol):
    """The crawl's scheduler, as the gate, the middlewares, the sitemaps and the status ask it.

    ``robots``, ``sitemaps`` and ``all_workers`` are None unless the frontier is shared by
    workers.
    """

    @property
    def seen(self) -> SeenSet | None:
        """The per-link seen test, None when the dupefilter has none."""

    @property
    def robots(self) -> RobotsCache | None:
        """robots.txt rules shared by the workers."""

    @property
    def sitemaps(self) -> SharedSitemaps | None:
        """Who reads a site's sitemaps, among the workers."""

    @property
    def all_workers(self) -> AllWorkers | None:
        """Pause, resume and stop for every worker of the crawl."""

    def enqueue_request(self, request: Request) -> bool:
        """Scrapy's: queue ``request``; False when the seen-set had it."""

    def status(self) -> dict[str, Any]:
        """Queue sizes, IPs by state, the seen-set's fill: the status page's figures."""

    def host_set_aside(self, host: str) -> None:
        """``host`` asked for a pause past the cap: nobody asks it again this crawl."""

    def count_items(self, receipts: ItemSettlement) -> None:
        """A page's items are parts of it (item receipts): acknowledged once they are stored."""


def _scheduler(crawler: Crawler) -> Any:
    """The running crawl's scheduler, or None (no engine yet, or the crawl is over)."""
    try:
        engine = crawler.engine
    except RuntimeError:  # a component built on its own (unit tests)
        return None
    return None if engine is None else engine.scheduler


def frontier_of(crawler: Crawler) -> Frontier | None:
    """The crawl's larbinscrapy frontier; None before the engine opens, or for another scheduler."""
    scheduler = _scheduler(crawler)
    return scheduler if isinstance(scheduler, Frontier) else None


def seen_set_of(crawler: Crawler) -> SeenSet | None:
    """The crawl's per-link seen test: the frontier's, or that of Scrapy's own scheduler when
    its dupefilter (``df``, a public attribute of Scrapy's ``Scheduler``) has one."""
    scheduler = _scheduler(crawler)
    if isinstance(scheduler, Frontier):
        return scheduler.seen
    if isinstance(scheduler, Scheduler) and isinstance(scheduler.df, SeenSet):
        return scheduler.df
    return None
