"""Distributed profile: many workers, one Redis (``SCRAPY_SETTINGS_MODULE=settings.distributed``).

    redis-cli lpush larbin:start_urls http://example.com/
    SCRAPY_SETTINGS_MODULE=settings.distributed scrapy crawl larbin -s REDIS_URL=redis://host:6379/0
    # a Redis Cluster: -s LARBIN_REDIS_CLUSTER=True -s REDIS_URL=redis://any-node:7000/0

Connection and seed settings use scrapy-redis's names (``REDIS_URL``, ``REDIS_PARAMS``,
``REDIS_START_URLS_KEY``, ``SCHEDULER_PERSIST``); keys are templates in its ``%(spider)s:...``
style. Their defaults live in ``larbinscrapy/conf/defaults.py`` with every other one (docs/settings.md);
docs/distributed.md explains the keys and the lease flow.
"""

from __future__ import annotations

from settings.base import *  # noqa: F403
from settings.base import ITEM_PIPELINES as _BASE_PIPELINES

SCHEDULER = "larbinscrapy.distributed.scheduler.RedisScheduler"  # shared two-tier frontier with per-IP leases
DUPEFILTER_CLASS = "larbinscrapy.distributed.dupefilter.RedisBitmapDupeFilter"  # seen bits in one Redis string (SETBIT)
LARBIN_DUPEFILTER_MODE = (
    "bloom"  # the Redis bit string is one fixed-size filter (no scalable chain in Redis yet)
)
ITEM_PIPELINES = {
    **_BASE_PIPELINES,
    "larbinscrapy.pipelines.contentdup.ContentDupPipeline": None,  # per-process: replaced below
    "larbinscrapy.distributed.contentdup.RedisContentDupPipeline": 100,  # content hashes shared by all workers
}

LARBIN_ALLOW_NO_SEEDS = True  # a worker may start without -a seeds/urls: seeds come from Redis
