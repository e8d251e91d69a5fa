"""``RedisContentDupPipeline``: larbin's ``hashDup`` (NO_DUP) shared by every worker.

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer

from larbinscrapy.distributed.connection import UNREACHABLE, connector
from larbinscrapy.distributed.jobs import Call, LuaScript, RedisJobs
from larbinscrapy.distributed.neardup import COPY_MARK, NearIndex, Verdict
from larbinscrapy.distributed.scheduler import RedisScheduler
from larbinscrapy.distributed.shards import spread_tags
from larbinscrapy.frontier import frontier_of
from larbinscrapy.pipelines.contentdup import content_hash, simhash
from larbinscrapy.reactor import installed_reactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from redis import Redis
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# KEYS: the hash; ARGV: digest, url. Nil if url is the first page with digest, else that page.
_FIRST_URL = r"""
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 1 then return false end
return redis.call('HGET', KEYS[1], ARGV[1])
"""


def _first_url(reply: bytes | None) -> str | None:
    return None if reply is None else reply.decode("utf-8", "replace")


class RedisContentDupPipeline:
    """Drops a page whose normalised body (or, with a near distance, its simhash's near twin)
    some worker already kept under another URL."""

    def __init__(
        self,
        server: Redis | None,
        key: str,
        stats: StatsCollector | None = None,
        *,
        connect: Callable[[], Any] | None = None,
        shards: int = 1,
        near_distance: int = 0,
        cluster: bool = False,
    ) -> None:
        self.server = server
        self.key = key
        # a cluster: one hash per shard tag, a page's digest chooses it
        self._keys = [f"{{{t}}}{key}" for t in spread_tags(shards)] if shards > 1 else [key]
        self.stats = stats
        self.near = NearIndex(f"{key}:near", near_distance, shards) if near_distance else None
        self.cluster = cluster or shards > 1  # scripts of one key each (one slot)
        self._logged_drop = False
        self._logged_unchecked = False
        self._jobs = RedisJobs("larbin-contentdup", server=server, connect=connect)
        self._own_jobs = True  # False: the scheduler's Redis thread, shared (``open_spider``)
        self._crawler: Crawler | None = None
        self._script = LuaScript(_FIRST_URL)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisContentDupPipeline:
        s = crawler.settings
        if not s.getbool("LARBIN_CONTENT_DUP"):
            raise NotConfigured("LARBIN_CONTENT_DUP is off")
        name = crawler.spidercls.name
        template = s["LARBIN_REDIS_CONTENTDUP_KEY"]
        server, connect, shards = connector(s)
        pipeline = cls(
            server,
            template % {"spider": name, "name": name},
            crawler.stats,
            connect=connect,
            shards=shards,
            near_distance=s.getint("LARBIN_CONTENT_DUP_NEAR_DISTANCE"),
            cluster=connect is not None,
        )
        pipeline._crawler = crawler
        return pipeline

    def open_spider(self, spider: Any = None) -> None:
        """The ``RedisScheduler``'s Redis thread when it runs (opened before the pipelines,
        closed after them): no second thread, client and hand-over a page; else our own."""
        scheduler = frontier_of(self._crawler) if self._crawler else None
        if isinstance(scheduler, RedisScheduler) and scheduler.jobs.running:
            self._jobs, self._own_jobs = scheduler.jobs, False
            return
        self._jobs.start()
        installed_reactor().addSystemEventTrigger("during", "shutdown", self._stop)

    def close_spider(self, spider: Any = None) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._own_jobs:
            self._jobs.stop()

    def _exact_key(self, digest: Any) -> str:
        return self._keys[int.from_bytes(digest[:4], "big") % len(self._keys)]

    def first_url_call(self, digest: Any, url: str) -> Call:
        """None if ``url`` is the first page with ``digest``, else that page's URL."""
        return Call.script_call(self._script, self._exact_key(digest), [digest, url], _first_url)

    async def process_item(self, item: Any, spider: Any = None) -> Any:
        if (item.get("fetch_count") or 1) > 1:  # a revisit (LARBIN_REVISIT): not a copy
            self._inc("revisit")
            return item
        body = item.get("body")
        digest = content_hash(body) if body else None
        if digest is None:
            self._inc("empty")
            return item
        url = item.get("url") or ""
        sim = simhash(body) if self.near is not None else 0
        try:
            verdict = await self._check(digest, url, sim)
        except UNREACHABLE as exc:
            # Redis away: keep the page (a copy kept beats a page lost); the scheduler's
            # outage rule decides whether the worker stops
            self._inc("unchecked")
            if not self._logged_unchecked:
                self._logged_unchecked = True
                logger.warning(
                    "Keeping %s unchecked for duplicate content: Redis: %s (further "
                    "ones are counted in larbin/contentdup/unchecked)",
                    url,
                    exc,
                )
            return item
        if verdict.kind == "near":
            raise self._drop(
                "near_dropped",
                url,
                f"near-duplicate content of a page kept earlier (distance {verdict.detail})",
            )
        first = verdict.detail
        if first is None or first == url:  # first == url: the same page fetched again (a
            self._inc("unique")  # re-leased request): keep it
            return item
        if first.startswith(COPY_MARK):  # the first page with this body was a near-duplicate
            event = "near_dropped" if first[1:] == url else "dropped"
            raise self._drop(event, url, f"duplicate content of {first[1:]}, a near-duplicate")
        raise self._drop("dropped", url, f"duplicate content of {first}")

    async def _check(self, digest: bytes, url: str, sim: int) -> Verdict:
        """The page's verdict: one script on one Redis; on a cluster the content hash first,
        then the near index's scripts."""
        if self.near is not None and not self.cluster:
            return await self._run(self.near.check_call(self._exact_key(digest), digest, url, sim))
        first = await self._run(self.first_url_call(digest, url))
        if first is not None:
            return Verdict("dup", first)
        if self.near is None or not sim:
            return Verdict("kept")
        near = self.near
        replies = await self._run_all([call for _, call in near.slot_calls(sim, url)])
        twin = near.loses_to(sim, [t for twins in replies for t in twins])
        for call in near.settle_calls(sim, url, kept=twin is None):
            self._jobs.submit("near-duplicate settle", call)
        if twin is None:
            return Verdict("kept")
        self._jobs.submit(
            "near-duplicate mark", near.mark_copy_call(self._exact_key(digest), digest, url)
        )
        if not twin.settled:
            self._inc("near_raced")
        return Verdict("near", twin.distance)

    async def _run(self, call: Call) -> Any:
        return await maybe_deferred_to_future(self._jobs.run(call))

    async def _run_all(self, calls: list[Call]) -> list[Any]:
        """Queued together (one pipeline, unless the thread wakes between two); raises the
        first failure."""
        done = defer.DeferredList([self._jobs.run(c) for c in calls], consumeErrors=True)
        results = await maybe_deferred_to_future(done)
        for ok, value in results:
            if not ok:
                value.raiseException()
        return [value for _, value in results]

    def _drop(self, event: str, url: str, reason: str) -> DropItem:
        """Count (log the first) and return the DropItem to raise."""
        self._inc(event)
        if not self._logged_drop:
            self._logged_drop = True
            logger.info(
                "Dropping %s: %s (further drops are counted in larbin/contentdup/*)", url, reason
            )
        return DropItem(reason, log_level="DEBUG")

    def _inc(self, event: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/contentdup/{event}")
