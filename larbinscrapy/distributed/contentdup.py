"""``RedisContentDupPipeline``: larbin's ``hashDup`` (NO_DUP) shared by every worker.

The same content hash as ``ContentDupPipeline`` (``contentdup.content_hash``: whitespace
collapsed, xxh3_128), kept in one Redis hash ``LARBIN_REDIS_CONTENTDUP_KEY`` (content hash ->
first URL) with ``HSETNX``: one atomic round trip per page decides which worker's page is the
first. A page fetched again after a crash (its lease was reaped) finds its own URL there and is
kept. Near duplicates (``LARBIN_NEAR_DUP_DISTANCE``) are not shared: a warning says so.
Memory: ~16 bytes of hash + the URL + ~60 bytes of Redis overhead a page. While Redis cannot
be reached, pages are kept unchecked (``larbin/contentdup/unchecked``).

``process_item`` is a coroutine: the check is one script call sent from the pipeline's own
Redis thread (``distributed.jobs.RedisJobs``: started in ``open_spider``, stopped in
``close_spider``), never from the reactor thread; the checks of the pages that finish while one
round trip is on its way share the next one (one pipeline).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from larbinscrapy.distributed.connection import UNREACHABLE, connector
from larbinscrapy.distributed.jobs import Call, LuaScript, RedisJobs
from larbinscrapy.distributed.shards import spread_tags
from larbinscrapy.pipelines.contentdup import content_hash
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
    """Drops a page whose normalised body some worker already kept under another URL."""

    def __init__(self, server: Redis | None, key: str, stats: StatsCollector | None = None, *,
                 connect: Callable[[], Any] | None = None, shards: int = 1) -> None:
        self.server = server
        self.key = key
        # a cluster: one hash per shard tag, a page's digest chooses it
        self._keys = [f"{{{t}}}{key}" for t in spread_tags(shards)] if shards > 1 else [key]
        self.stats = stats
        self._logged_drop = False
        self._logged_unchecked = False
        self._jobs = RedisJobs("larbin-contentdup", server=server, connect=connect)
        self._script = LuaScript(_FIRST_URL)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisContentDupPipeline:
        s = crawler.settings
        if not s.getbool("LARBIN_CONTENT_DUP"):
            raise NotConfigured("LARBIN_CONTENT_DUP is off")
        if s.getint("LARBIN_NEAR_DUP_DISTANCE"):
            logger.warning("LARBIN_NEAR_DUP_DISTANCE is not shared between workers: "
                           "only exact content duplicates are dropped")
        name = crawler.spidercls.name
        template = s["LARBIN_REDIS_CONTENTDUP_KEY"]
        server, connect, shards = connector(s)
        return cls(server, template % {"spider": name, "name": name}, crawler.stats,
                   connect=connect, shards=shards)

    def open_spider(self, spider: Any = None) -> None:
        self._jobs.start()
        installed_reactor().addSystemEventTrigger("during", "shutdown", self._stop)

    def close_spider(self, spider: Any = None) -> None:
        self._stop()

    def _stop(self) -> None:
        self._jobs.stop()

    def first_url_call(self, digest: Any, url: str) -> Call:
        """None if ``url`` is the first page with ``digest``, else that page's URL."""
        key = self._keys[int.from_bytes(digest[:4], "big") % len(self._keys)]
        return Call.script_call(self._script, key, [digest, url], _first_url)

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
        try:
            first = await maybe_deferred_to_future(
                self._jobs.run(self.first_url_call(digest, url)))
        except UNREACHABLE as exc:
            # Redis away: keep the page (a copy kept beats a page lost); the scheduler's
            # outage rule decides whether the worker stops
            self._inc("unchecked")
            if not self._logged_unchecked:
                self._logged_unchecked = True
                logger.warning("Keeping %s unchecked for duplicate content: Redis: %s (further "
                               "ones are counted in larbin/contentdup/unchecked)", url, exc)
            return item
        if first is None or first == url:  # first == url: the same page fetched again (a
            self._inc("unique")  # re-leased request): keep it
            return item
        self._inc("dropped")
        if not self._logged_drop:
            self._logged_drop = True
            logger.info("Dropping %s: duplicate content of %s (further drops are counted in "
                        "larbin/contentdup/*)", url, first)
        raise DropItem(f"duplicate content of {first}", log_level="DEBUG")

    def _inc(self, event: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/contentdup/{event}")
