"""The revisit schedule in Redis, beside the shared frontier (``settings.distributed``).

The schedule is sharded by host as the frontier is (``HostShards``: ``LARBIN_REDIS_SHARDS`` hash
tags on a Redis Cluster): each shard has its own ``<key>:due`` (zset fp -> due time),
``:flight`` (zset fp + fetch count -> time handed out) and ``:state`` (hash fp -> packed entry)
in its slot, a page lives in the shard of its URL's host, and every script touches one shard.
With one Redis there is one shard and the keys are those of earlier versions (no tag); a
cluster with one shard tags them ``{<key>}``.

A take runs every shard's take script in one pipeline (one round trip: the cluster client
writes to every master before it reads), each handing out, in due order, at most its share of
the in-flight limit and of the batch, and first its own flight entries older than the lease (a
dead worker's). A shard that answers an error hands nothing out that time; the others do.

The client is built, and connects, in the schedule's own thread at its first call.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any

from larbinscrapy.distributed.jobs import Call, LuaScript, run_call, run_calls
from larbinscrapy.distributed.shards import HostShards
from larbinscrapy.parse.urls import host_of
from larbinscrapy.revisit.entry import Entry

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

_COUNT = struct.Struct("<I")
_COUNT_AT = 33  # 1-based offset of the fetch count in a packed entry (Lua string.sub)

_TAKE = LuaScript(f"""
local due, flight, state = KEYS[1], KEYS[2], KEYS[3]
local now, cutoff, limit, batch = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {{}}
local old = redis.call('ZRANGEBYSCORE', flight, '-inf', cutoff, 'LIMIT', 0, batch)
for _, member in ipairs(old) do
  redis.call('ZADD', flight, now, member)
  local st = redis.call('HGET', state, string.sub(member, 1, 16))
  if st then out[#out + 1] = st end
end
local room = math.min(batch - #old, limit - redis.call('ZCARD', flight))
if room > 0 then
  for _, fp in ipairs(redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, room)) do
    redis.call('ZREM', due, fp)
    local st = redis.call('HGET', state, fp)
    if st then
      redis.call('ZADD', flight, now, fp .. string.sub(st, {_COUNT_AT}, {_COUNT_AT + 3}))
      out[#out + 1] = st
    end
  end
end
return {{#old, redis.call('ZCARD', due) + redis.call('ZCARD', flight), out}}
""")
_DONE = LuaScript("""
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  return 1
end
return 0
""")
_FORGET = LuaScript("""
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
""")
_ADD = LuaScript("""
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return 0
""")


def flight_member(entry: Entry) -> bytes:
    return entry.fp + _COUNT.pack(entry.fetch_count)


class RedisRevisitStore:
    """The schedule shared by every worker (see the module docstring). Blocking calls."""

    def __init__(
        self,
        server: Any,
        key: str,
        inflight: int,
        batch: int = 1000,
        *,
        connect: Callable[[], Any] | None = None,
        shards: HostShards | None = None,
    ) -> None:
        self._server = server  # None until ``connect`` made it (a cluster client)
        self._connect = connect
        self.shards = shards or HostShards(1)
        n = self.shards.count
        if n == 1 and connect is not None:  # a cluster with one shard: its keys in one slot
            key = f"{{{key}}}"
        self.shard_keys = [
            tuple(f"{self.shards.tagged(i, key)}:{part}" for part in ("due", "flight", "state"))
            for i in range(n)
        ]
        self.inflight = max(1, inflight // n)  # each shard's share: never more in all
        self.batch = max(1, -(-batch // n))

    @property
    def server(self) -> Any:
        if self._server is None and self._connect is not None:
            self._server = self._connect()
        return self._server

    def keys(self, entry: Entry) -> tuple[str, ...]:
        """The three keys of ``entry``'s shard (its URL's host's)."""
        return self.shard_keys[self.shards.of(host_of(entry.url))]

    def _run(self, script: LuaScript, keys: tuple[str, ...], *args: Any) -> Any:
        return run_call(self.server, Call(("EVALSHA", script.sha, 3, *keys, *args), script=script))

    def add(self, entry: Entry) -> bool:
        """Schedule a new page; False if some worker already did."""
        return bool(self._run(_ADD, self.keys(entry), entry.fp, entry.pack(), entry.due))

    def done(self, old: Entry, new: Entry) -> bool:
        """The fetch of ``old`` (a flight entry) gave ``new`` (the same page); False for a
        stale copy."""
        return bool(
            self._run(_DONE, self.keys(old), flight_member(old), new.fp, new.pack(), new.due)
        )

    def forget(self, old: Entry) -> bool:
        """The page of ``old`` (a flight entry) is gone for good: its schedule goes; False for
        a stale copy."""
        return bool(self._run(_FORGET, self.keys(old), flight_member(old), old.fp))

    def in_flight(self, entry: Entry) -> bool:
        """``entry`` is still the page's flight entry (no copy of it was fetched and done)."""
        member = flight_member(entry)
        return run_call(self.server, Call(("ZSCORE", self.keys(entry)[1], member))) is not None

    def take(self, now: float, lease: float) -> tuple[int, int | None, list[Entry]]:
        """(re-taken after the lease, pages scheduled in all or None if a shard failed,
        entries to hand out), from every shard in one round trip."""
        args = (now, now - lease, self.inflight, self.batch)
        calls = [
            Call(("EVALSHA", _TAKE.sha, 3, *keys, *args), script=_TAKE) for keys in self.shard_keys
        ]
        expired, total, entries = 0, 0, []
        failed: list[Exception] = []
        for reply in run_calls(self.server, calls):
            if isinstance(reply, Exception):
                failed.append(reply)
                continue
            old, scheduled, packed = reply
            expired, total = expired + int(old), total + int(scheduled)
            entries += [Entry.unpack(p) for p in packed]
        if failed:
            logger.warning(
                "revisit: %d of %d shards of the schedule failed to answer: %s",
                len(failed),
                len(calls),
                failed[0],
            )
        return expired, None if failed else total, entries

    def count(self) -> int:
        """Pages scheduled in all (due or in flight)."""
        calls = [
            Call((cmd, keys[k]), int)
            for keys in self.shard_keys
            for cmd, k in (("ZCARD", 0), ("ZCARD", 1))
        ]
        replies = run_calls(self.server, calls)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        return sum(replies)
