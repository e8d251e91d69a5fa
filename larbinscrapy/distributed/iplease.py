"""``IpLeases``: per-IP politeness across the shards of a Redis Cluster.

Each shard's frontier keeps its own per-IP state (``P:ready``, ``P:busy``, ``P:readyat``), which
is exact for the hosts of that shard. An IP serving hosts of several shards (virtual hosting)
would be handed out by each of them independently, so in a cluster every lease a shard hands
out must also take the IP's own lease key (``Shards.ip_key``: a sorted set in the shard the IP
hashes to), one script on one slot:

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

from typing import Any

from larbinscrapy.distributed.jobs import Call, LuaScript

_CLOCK = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local K = KEYS[1]
local function expire()
  local last = redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')
  if #last > 0 then redis.call('PEXPIRE', K, math.max(1, tonumber(last[2]) - now)) end
end
"""

# KEYS: the IP's key; ARGV: token, connections, lease ms, poll ms. 0: taken, else ms to wait.
_ACQUIRE = (
    _CLOCK
    + r"""
local token, conn, lease, poll = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', K, '-inf', now)
if redis.call('ZSCORE', K, token) or redis.call('ZCARD', K) < conn then
  redis.call('ZADD', K, now + lease, token)
  expire()
  return 0
end
local first = redis.call('ZRANGE', K, 0, 0, 'WITHSCORES')
local wait = tonumber(first[2]) - now
if string.sub(first[1], 1, 1) ~= '~' then wait = math.min(wait, poll) end
return math.max(1, wait)
"""
)

# KEYS: the IP's key; ARGV: token, delay ms. 1 if the token was still there.
_RELEASE = (
    _CLOCK
    + r"""
local token, delay = ARGV[1], tonumber(ARGV[2])
local had = redis.call('ZREM', K, token)
if delay > 0 then redis.call('ZADD', K, now + delay, '~' .. token) end
expire()
return had
"""
)


class IpLeases:
    """The per-IP lease calls (module docstring); ``key_of`` names an IP's key."""

    def __init__(self, key_of: Any, *, connections: int, lease_timeout: float, poll: float) -> None:
        self.key_of = key_of
        self.connections = max(1, connections)
        self.lease_ms = max(1, round(lease_timeout * 1000))
        self.poll_ms = max(1, round(poll * 1000))
        self._acquire = LuaScript(_ACQUIRE)
        self._release = LuaScript(_RELEASE)

    def acquire_call(self, ip: str, token: str) -> Call:
        """Its result: 0 (the lease is taken) or the seconds to wait before asking again."""
        return Call.script_call(
            self._acquire,
            self.key_of(ip),
            [token, self.connections, self.lease_ms, self.poll_ms],
            lambda ms: int(ms) / 1000,
        )

    def release_call(self, ip: str, token: str, delay: float) -> Call:
        return Call.script_call(
            self._release, self.key_of(ip), [token, max(0, round(delay * 1000))], int
        )
