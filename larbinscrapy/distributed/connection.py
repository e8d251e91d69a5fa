"""The Redis client of a worker: one Redis (scrapy-redis's ``get_redis_from_settings``) or a
Redis Cluster (``LARBIN_REDIS_CLUSTER``: redis-py's ``RedisCluster``, ``REDIS_URL`` naming any
node; it finds the others and follows ``MOVED``/``ASK`` while slots move).

A cluster client connects when it is built, so it is built by ``connector``'s function in the
worker's Redis thread (``RedisJobs``), never in the reactor thread; a single Redis client
connects on first use and is built at once. The cluster client is ``lean.rediscluster``'s: it
routes script calls by their keys with redis-py's private command policies, behind the wall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import RedisClusterException
from scrapy_redis import defaults
from scrapy_redis.connection import get_redis_from_settings

from larbinscrapy.lean.rediscluster import cluster_client

__all__ = ["UNREACHABLE", "cluster_client", "connector"]

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.settings import BaseSettings

# What "Redis is not there (yet)" looks like to the client, cluster included: a master down or
# restarting, slots not covered, keys moving between masters (a reshard) that the client could
# not follow at once. A job failing so is retried; it is never a bug.
UNREACHABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    RedisClusterException,
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,
)


def connector(settings: BaseSettings) -> tuple[Any, Callable[[], Any] | None, int]:
    """(client or None, the function that makes it or None, shard count).

    One Redis: (client, None, 1). A cluster: (None, make client, ``LARBIN_REDIS_SHARDS``)."""
    if not settings.getbool("LARBIN_REDIS_CLUSTER"):
        return get_redis_from_settings(settings), None, 1
    params = {**defaults.REDIS_PARAMS, **settings.getdict("REDIS_PARAMS")}
    params.pop("encoding", None)  # replies stay bytes, as with one Redis (no decode_responses)
    url = settings.get("REDIS_URL") or ""

    def make() -> Any:
        return cluster_client(url, **params)

    return None, make, settings.getint("LARBIN_REDIS_SHARDS")
