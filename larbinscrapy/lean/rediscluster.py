"""``cluster_client``: redis-py's ``RedisCluster`` that routes script calls by their keys, and
``pipelined``: a batch of one-key commands sent as one plain pipeline a master.

Replaces: ``RedisCluster.pipeline``'s pipelines (they leave the client's command policies out, so
each script call costs a ``COMMAND GETKEYS`` round trip) and the first attempt of
``ClusterPipeline.execute`` (a policy, a command object and a node lookup for every call: the
client CPU of a worker's batches, measured in benchmarks/RESULTS.md, "Issue 33,
point 1: a batch a master"): ``_Cluster.by_node`` groups the calls by master and writes and
reads each group as redis-py's ``NodeCommands`` does; what that did not settle goes to redis-py's.
Private names: ``redis._parsers.commands`` (``CommandPolicies``, ``RequestPolicy``,
``ResponsePolicy``), ``RedisCluster._policy_resolver``, ``ClusterPipeline._policy_resolver``;
by digest: ``RedisCluster.pipeline``, ``PipelineStrategy._send_cluster_commands``,
``NodeCommands``. Fallback: when one changed (``check``: one warning), redis-py's own client.
Retire when: redis-py's cluster pipelines take the client's policies and cost a plain pipeline's.
More in docs/modules.md (`larbinscrapy/lean/rediscluster.py`).
"""

from __future__ import annotations

import logging
from functools import cache
from typing import TYPE_CHECKING, Any

from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands.policies import BasePolicyResolver, StaticPolicyResolver
from redis.exceptions import ConnectionError, RedisClusterException, RedisError, TimeoutError

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
    ("redis.cluster", "PipelineStrategy._send_cluster_commands", "4be5ee0cda30"),  # by_node
    ("redis.cluster", "NodeCommands", "088e9f097b96"),  # how by_node writes and reads a node
)

# Where a command's one key is: a script call's first key, else the command's first argument.
_KEY_AT = {"EVALSHA": 3, "EVAL": 3}
# Replies redis-py's pipeline retries (``ClusterPipeline.ERRORS_ALLOW_RETRY``): sent again there.
_AGAIN = ClusterPipeline.ERRORS_ALLOW_RETRY
_NOT_SENT = object()  # a command whose node could not be asked: redis-py's pipeline sends it


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

    def by_node(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Each command's reply (an error in its place): one write and its reads a master,
        then redis-py's pipeline for what that did not settle (module docstring)."""
        groups: dict[str, tuple[Any, list[int]]] = {}
        try:
            for i, args in enumerate(commands):
                node = self.get_node_from_key(args[_KEY_AT.get(args[0], 1)])
                groups.setdefault(node.name, (node, []))[1].append(i)
        except (RedisClusterException, RedisError, IndexError):  # no master known: redis-py's
            return _one_pipeline(self, commands)
        replies: list[Any] = [_NOT_SENT] * len(commands)
        written: list[tuple[list[int], Any, Any]] = []  # written, not yet read
        try:
            for node, idx in groups.values():
                client, conn = self._write(node, [commands[i] for i in idx])
                if conn is not None:
                    written.append((idx, client, conn))
            while written:
                idx, client, conn = written.pop(0)
                self._read(client, conn, idx, commands, replies)
        finally:
            for _, client, conn in written:  # an unexpected error: never reused with replies due
                conn.disconnect()
                client.connection_pool.release(conn)
        again = [i for i, r in enumerate(replies) if r is _NOT_SENT or isinstance(r, _AGAIN)]
        if again:
            try:
                retried = _one_pipeline(self, [commands[i] for i in again])
            except RedisError as exc:  # the others ran: each of these fails, not the batch
                retried = [exc] * len(again)
            for i, r in zip(again, retried, strict=True):
                replies[i] = r
        return replies

    def _write(self, node: Any, commands: list[tuple[Any, ...]]) -> tuple[Any, Any]:
        """(client, connection) with ``commands`` written, or (client, None) if it failed."""
        client = self.get_redis_connection(node)
        try:
            conn = client.connection_pool.get_connection()
        except RedisError:
            return client, None
        try:
            conn.send_packed_command(conn.pack_commands(commands))
        except BaseException as exc:
            conn.disconnect()
            client.connection_pool.release(conn)
            if isinstance(exc, RedisError):
                return client, None
            raise
        return client, conn

    @staticmethod
    def _read(
        client: Any, conn: Any, idx: list[int], commands: list[Any], replies: list[Any]
    ) -> None:
        """Read ``idx``'s replies into ``replies``. A connection that fails is dropped and the
        replies not read stay ``_NOT_SENT`` (redis-py sends the node's commands again, those
        already answered included; these are not)."""
        try:
            for i in idx:
                try:
                    replies[i] = client.parse_response(conn, commands[i][0])
                except (ConnectionError, TimeoutError):
                    raise
                except RedisError as exc:  # this command's error reply
                    replies[i] = exc
        except (ConnectionError, TimeoutError):
            conn.disconnect()  # replies may still come: never hand it to another caller
        except BaseException:
            conn.disconnect()
            raise
        finally:
            client.connection_pool.release(conn)


def _one_pipeline(server: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """redis-py's own pipeline of ``commands`` (a cluster's follows moved slots)."""
    pipe = server.pipeline(transaction=False)
    for args in commands:
        pipe.execute_command(*args)
    return list(pipe.execute(raise_on_error=False))


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


def pipelined(server: Any, commands: list[tuple[Any, ...]]) -> list[Any]:
    """Each command's reply or its error, in order: one pipeline (a cluster: one a master)."""
    if isinstance(server, _Cluster):
        return server.by_node(commands)
    return _one_pipeline(server, commands)


def cluster_client(url: str, **params: Any) -> Any:
    """A Redis Cluster client of ``url`` whose script calls go straight to their keys' node."""
    if not usable():
        return RedisCluster.from_url(url, **params)
    resolver: PolicyResolver = StaticPolicyResolver(_ScriptsKeyed())
    return _Cluster.from_url(url, policy_resolver=resolver, **params)
