"""``RedisContentDupPipeline``: larbin's ``hashDup`` (NO_DUP) shared by every worker.

The same content hash as ``ContentDupPipeline`` (``contentdup.content_hash``: whitespace
collapsed, xxh3_128), kept in one Redis hash ``LARBIN_REDIS_CONTENTDUP_KEY`` (content hash ->
first URL) with ``HSETNX``: one atomic round trip per page decides which worker's page is the
first. A page fetched again after a crash (its lease was reaped) finds its own URL there and is
kept. Near duplicates (``LARBIN_NEAR_DUP_DISTANCE``) are not shared: a warning says so.
Memory: ~16 bytes of hash + the URL + ~60 bytes of Redis overhead a page.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem, NotConfigured
from scrapy_redis.connection import get_redis_from_settings

from larbinscrapy.pipelines.contentdup import content_hash

if TYPE_CHECKING:
    from redis import Redis
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class RedisContentDupPipeline:
    """Drops a page whose normalised body some worker already kept under another URL."""

    def __init__(self, server: Redis, key: str, stats: StatsCollector | None = None) -> None:
        self.server = server
        self.key = key
        self.stats = stats
        self._logged_drop = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisContentDupPipeline:
        s = crawler.settings
        if not s.getbool("LARBIN_CONTENT_DUP", True):
            raise NotConfigured("LARBIN_CONTENT_DUP is off")
        if s.getint("LARBIN_NEAR_DUP_DISTANCE", 0):
            logger.warning("LARBIN_NEAR_DUP_DISTANCE is not shared between workers: "
                           "only exact content duplicates are dropped")
        name = crawler.spidercls.name
        template = s.get("LARBIN_REDIS_CONTENTDUP_KEY") or "%(spider)s:contentdup"
        return cls(get_redis_from_settings(s), template % {"spider": name, "name": name},
                   crawler.stats)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        body = item.get("body")
        digest = content_hash(body) if body else None
        if digest is None:
            self._inc("empty")
            return item
        url = item.get("url") or ""
        if self.server.hsetnx(self.key, digest, url):
            self._inc("unique")
            return item
        first = (self.server.hget(self.key, digest) or b"").decode("utf-8", "replace")
        if first == url:  # the same page fetched again (a re-leased request): keep it
            self._inc("unique")
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
