"""The revisit schedule in Redis, beside the shared frontier (``settings.distributed``).

On a Redis Cluster (``LARBIN_REDIS_CLUSTER``) its three keys share one hash tag (each script
touches them together), so the schedule lives on one master; the client is built, and connects,
in the schedule's own thread at its first call.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from larbinscrapy.revisit.entry import Entry

if TYPE_CHECKING:
    from collections.abc import Callable

_COUNT = struct.Struct("<I")
_COUNT_AT = 33  # 1-based offset of the fetch count in a packed entry (Lua string.sub)

_TAKE = f"""
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
"""
_DONE = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
  return 1
end
return 0
"""
_FORGET = """
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
_ADD = """
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
  return 1
end
return 0
"""


def flight_member(entry: Entry) -> bytes:
    return entry.fp + _COUNT.pack(entry.fetch_count)


class RedisRevisitStore:
    """The schedule shared by every worker (see the module docstring). Blocking calls."""

    def __init__(self, server: Any, key: str, inflight: int, batch: int = 1000, *,
                 connect: Callable[[], Any] | None = None) -> None:
        self._server = server  # None until ``connect`` made it (a cluster client)
        self._connect = connect
        if connect is not None:  # a cluster: the three keys in one slot
            key = f"{{{key}}}"
        self.keys = (f"{key}:due", f"{key}:flight", f"{key}:state")
        self.inflight = inflight
        self.batch = batch
        self._scripts: dict[str, Any] = {}

    @property
    def server(self) -> Any:
        if self._server is None and self._connect is not None:
            self._server = self._connect()
        return self._server

    def _script(self, text: str) -> Any:
        script = self._scripts.get(text)
        if script is None:
            script = self._scripts[text] = self.server.register_script(text)
        return script

    def _take(self, keys: tuple[str, ...], args: list[Any]) -> Any:
        return self._script(_TAKE)(keys=keys, args=args)

    def _done(self, keys: tuple[str, ...], args: list[Any]) -> Any:
        return self._script(_DONE)(keys=keys, args=args)

    def _add(self, keys: tuple[str, ...], args: list[Any]) -> Any:
        return self._script(_ADD)(keys=keys, args=args)

    def add(self, entry: Entry) -> bool:
        """Schedule a new page; False if some worker already did."""
        return bool(self._add(keys=self.keys, args=[entry.fp, entry.pack(), entry.due]))

    def done(self, old: Entry, new: Entry) -> bool:
        """The fetch of ``old`` (a flight entry) gave ``new``; False for a stale copy."""
        return bool(self._done(keys=self.keys,
                               args=[flight_member(old), new.fp, new.pack(), new.due]))

    def forget(self, old: Entry) -> bool:
        """The page of ``old`` (a flight entry) is gone for good: its schedule goes; False for
        a stale copy."""
        return bool(self._script(_FORGET)(keys=self.keys, args=[flight_member(old), old.fp]))

    def take(self, now: float, lease: float) -> tuple[int, int, list[Entry]]:
        """(re-taken after the lease, pages scheduled in all, entries to hand out)."""
        expired, total, packed = self._take(
            keys=self.keys, args=[now, now - lease, self.inflight, self.batch])
        return int(expired), int(total), [Entry.unpack(p) for p in packed]

    def count(self) -> int:
        pipe = self.server.pipeline(transaction=False)
        pipe.zcard(self.keys[0])
        pipe.zcard(self.keys[1])
        return sum(pipe.execute())
