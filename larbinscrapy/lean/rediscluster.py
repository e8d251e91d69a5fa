"""``cluster_client``: redis-py's ``RedisCluster`` that routes script calls by their keys.

Replaces: ``RedisCluster.pipeline``'s pipelines, which leave out the client's command policies.
redis-py's static policies leave ``EVAL``/``EVALSHA`` out, and a cluster pipeline then asks a
node for each script call's keys (``COMMAND GETKEYS``, one round trip per call) before it sends
anything; a keyed policy routes them by their keys' slot, read from the arguments.
Private names: ``redis._parsers.commands`` (``CommandPolicies``, ``RequestPolicy``,
``ResponsePolicy``), ``RedisCluster._policy_resolver`` and ``ClusterPipeline._policy_resolver``
(set by their ``__init__``, compared by digest with ``RedisCluster.pipeline``).
Fallback: when one changed (``check``: one warning), redis-py's own ``RedisCluster``: every
script call costs a ``COMMAND GETKEYS`` round trip again, nothing else changes.
Retire when: redis-py's static policies key ``EVAL``/``EVALSHA`` and its cluster pipelines
take the client's policy resolver.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, Any

from redis.cluster import RedisCluster
from redis.commands.policies import BasePolicyResolver, StaticPolicyResolver

from larbinscrapy.lean.requires import Private, problems

if TYPE_CHECKING:
    from redis.commands.policies import PolicyResolver

logger = logging.getLogger(__name__)

REQUIRES: tuple[Private, ...] = (
    ("redis._parsers.commands", "CommandPolicies"),
    ("redis._parsers.commands", "RequestPolicy.DEFAULT_KEYED"),
    ("redis._parsers.commands", "ResponsePolicy.DEFAULT_KEYED"),
    ("redis.cluster", "RedisCluster.pipeline", "280ca3fa7469"),  # leaves the resolver out
    ("redis.cluster", "ClusterPipeline.__init__", "6baea8048de2"),  # sets ._policy_resolver
)


class _ScriptsKeyed(BasePolicyResolver):
    """``EVAL``/``EVALSHA`` as keyed commands."""

    def __init__(self) -> None:
        from redis._parsers.commands import CommandPolicies, RequestPolicy, ResponsePolicy

        keyed = CommandPolicies(RequestPolicy.DEFAULT_KEYED, ResponsePolicy.DEFAULT_KEYED)
        super().__init__({"core": {"eval": keyed, "evalsha": keyed}})

    def with_fallback(self, fallback: Any) -> _ScriptsKeyed:
        return self


class _Cluster(RedisCluster):
    """``RedisCluster`` whose pipelines use its command policies (redis-py's do not)."""

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        pipe._policy_resolver = self._policy_resolver
        return pipe


def check(requires: tuple[Private, ...] = REQUIRES) -> list[str]:
    """One warning when a private name changed in the installed redis-py; its problems."""
    found = problems(requires)
    if found:
        logger.warning(
            "larbinscrapy: private redis-py names changed (%s): a Redis Cluster's "
            "script calls each ask a node for their keys first",
            "; ".join(found),
        )
    return found


@cache
def usable() -> bool:
    """Whether the keyed client can be built here (``check`` once a process)."""
    return not check()


def cluster_client(url: str, **params: Any) -> Any:
    """A Redis Cluster client of ``url`` whose script calls go straight to their keys' node."""
    if not usable():
        return RedisCluster.from_url(url, **params)
    resolver: PolicyResolver = StaticPolicyResolver(_ScriptsKeyed())
    return _Cluster.from_url(url, policy_resolver=resolver, **params)
