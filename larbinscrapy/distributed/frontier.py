"""``RedisFrontier``: larbin's frontier kept in Redis, every step one atomic Lua script.

The Redis side of ``RedisScheduler``, with no Scrapy in it (tests drive it directly). It keeps
the local scheduler's semantics (``larbinscrapy/frontier/scheduler.py``) for many workers:

* two tiers, each with a wait list: ``P:tier:0..3`` (priority, priority-wait, normal,
  normal-wait), entries ``site \\t host \\t record`` (``record`` is ``frontier.codec``'s), or
  the record alone when site and host follow from its URL (the common case: ``entry``);
* the sequencer (``refill``, inside ``pop``) moves entries to per-site lists ``P:site:<site>``
  capped at ``LARBIN_MAX_URLS_PER_SITE`` (overflow goes to the tier's wait list), at most
  ``LARBIN_LOADED_SITES * cap`` records in site lists at once;
* a site's URLs are served only once its host is resolved: ``P:dns`` maps host -> IP (or
  ``!reason``); until then its site waits in ``P:hostsites:<host>`` and the host in
  ``P:unresolved`` for a worker to resolve it and call ``resolved``;
* dead ends leave the frontier: a worker that drops an IP (``release`` with ``dead``) adds it
  to ``P:deadips`` and drops the sites queued on it; entries of its hosts that reach the
  sequencer later are dropped there (and the host marked ``!noconnection``), so a frontier
  left with only dead hosts' URLs empties and the workers close;
* per-IP round robin: ``P:ipsites:<ip>`` lists an IP's sites with work; ``P:ready`` is a sorted
  set of the IPs with work whose connections are not all taken, scored by the time (ms, Redis
  ``TIME``: one clock for all workers) before which they must not be used (``P:readyat``);
* leases: ``pop`` hands an IP out (``P:busy`` counts its connections, ``P:held:<worker>`` who
  holds them) and the record (``P:lease:<worker>``, lease id -> ``ip \\t site \\t record``).
  ``release`` ends the IP lease when the fetch ends: the IP is ready again at *Redis now +
  delay*. ``admit`` acknowledges records after the outlinks they produced are queued, in the
  same script, so a crash never separates "seen" bits from queued records. A worker whose
  heartbeat (``P:workers``) is older than the lease timeout is reaped: its records go back to
  the front of their site lists and its IPs are freed.

Counters in ``P:count``: ``queued`` (records in tiers and site lists), ``insites``, ``leased``.
All keys start with the prefix, so a hash tag in it (``{larbin}:frontier``) puts the whole
frontier in one Redis Cluster slot (docs/distributed.md).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from larbinscrapy.distributed.dupefilter import BITS_LUA
from larbinscrapy.distributed.jobs import Call, run_call

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from redis import Redis
    from redis.commands.core import Script

logger = logging.getLogger(__name__)

# A record whose URL is http(s) with a lower-case host: its site and host need not be stored.
_DERIVABLE = re.compile(rb'\["(https?)://([a-z0-9.\-]+)(?::([1-9][0-9]*))?[/?#"]').match
_DEFAULT_PORT = {b"http": b"80", b"https": b"443"}

TIERS = ("priority", "priority-wait", "normal", "normal-wait")
PRIORITY, NORMAL = 0, 2

# Shared by every script: the clock, counters and the IP placement rule. Every script is sent
# with the prefix as KEYS[1] too (it routes the call to the prefix's shard) and as ARGV[1].
_COMMON = r"""
local P = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local CK = P .. ':count'
local function count(field, n)  -- n ~= 0: Lua's -0 is not an integer to Redis
  if n ~= 0 then redis.call('HINCRBY', CK, field, n) end
end
local function place(ip, conn)
  local ready = P .. ':ready'
  if redis.call('LLEN', P .. ':ipsites:' .. ip) == 0
     or redis.call('SISMEMBER', P .. ':deadips', ip) == 1 then
    redis.call('ZREM', ready, ip) return
  end
  local busy = tonumber(redis.call('HGET', P .. ':busy', ip) or '0')
  if busy >= conn then redis.call('ZREM', ready, ip) return end
  local at = tonumber(redis.call('HGET', P .. ':readyat', ip) or '0')
  redis.call('ZADD', ready, at, ip)
end
local function link(site, ip, conn)
  redis.call('RPUSH', P .. ':ipsites:' .. ip, site)
  place(ip, conn)
end
local function drop_site(site)
  local skey = P .. ':site:' .. site
  local n = redis.call('LLEN', skey)
  redis.call('DEL', skey)
  count('insites', -n) count('queued', -n)
  return n
end
-- A tier entry is "site \t host \t record", or the record alone when its URL's site and host
-- follow from it (RedisFrontier.entry): an http(s) URL with a lower-case host.
local function split_entry(e)
  if string.byte(e, 1) == 91 then  -- '['
    local scheme, host, port = string.match(e, '^%["(https?)://([a-z0-9%.%-]+):?(%d*)')
    if port == '' then port = (scheme == 'https') and '443' or '80' end
    return scheme .. '://' .. host .. ':' .. port, host, e
  end
  return string.match(e, '^([^\t]*)\t([^\t]*)\t(.*)$')
end
local function host_of_site(site)
  return string.match(site, '^[^:]+://%[?([^%]/]-)%]?:?%d*$') or site
end
-- Put a leased record back at the front of its site list (a reaped or returned lease).
local function requeue(v, conn)
  local ip, site, rec = string.match(v, '^([^\t]*)\t([^\t]*)\t(.*)$')
  count('leased', -1)
  if redis.call('SISMEMBER', P .. ':deadips', ip) == 1 then return 0 end
  local skey = P .. ':site:' .. site
  if redis.call('LPUSH', skey, rec) == 1 then link(site, ip, conn) end
  count('insites', 1) count('queued', 1)
  return 1
end
local function free_ips(worker, conn)
  local hkey = P .. ':held:' .. worker
  local held = redis.call('HGETALL', hkey)
  for i = 1, #held, 2 do
    local ip, n = held[i], tonumber(held[i + 1])
    if redis.call('HINCRBY', P .. ':busy', ip, -n) <= 0 then
      redis.call('HDEL', P .. ':busy', ip)
    end
    place(ip, conn)
  end
  redis.call('DEL', hkey)
end
"""

# ARGV: prefix, worker, want, conn, mem_limit, cap, budget, first lease id
_POP = _COMMON + r"""
local worker, want, conn = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local mem_limit, cap, budget = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local lid = tonumber(ARGV[8])
local out, unresolved = {}, {}
redis.call('ZADD', P .. ':workers', 'NX', now, worker)  -- a lease needs a heartbeat to expire
local stats = {dropped = 0, to_wait = 0}

local function refill()
  local order = {0, 1, 2, 3}
  if redis.call('INCR', P .. ':turn') % 4 == 0 then order = {1, 0, 3, 2} end
  local insites = tonumber(redis.call('HGET', CK, 'insites') or '0')
  local moved = 0
  for _, tier in ipairs(order) do
    local tkey = P .. ':tier:' .. tier
    -- a wait list is read at most once around per call: entries of a still full site go back
    -- to its end, and must not be read (and pushed back) again in this pass
    local left = (tier % 2 == 1) and redis.call('LLEN', tkey) or budget
    while budget > 0 and left > 0 and insites < mem_limit do
      left = left - 1
      local e = redis.call('LPOP', tkey)
      if not e then break end
      budget = budget - 1
      local site, host, rec = split_entry(e)
      local ip = redis.call('HGET', P .. ':dns', host)
      if ip and string.sub(ip, 1, 1) ~= '!'
         and redis.call('SISMEMBER', P .. ':deadips', ip) == 1 then
        -- resolved before its IP was dropped: its URLs go too, never parked in a site list
        ip = '!noconnection'
        redis.call('HSET', P .. ':dns', host, ip)
      end
      if ip and string.sub(ip, 1, 1) == '!' then
        count('queued', -1) stats.dropped = stats.dropped + 1
      else
        local skey = P .. ':site:' .. site
        local n = redis.call('LLEN', skey)
        if n >= cap then
          local wait = (tier < 2) and 1 or 3
          redis.call('RPUSH', P .. ':tier:' .. wait, e)
          stats.to_wait = stats.to_wait + 1
        else
          redis.call('RPUSH', skey, tier .. rec)
          insites = insites + 1 moved = moved + 1
          if n == 0 then
            if ip then link(site, ip, conn)
            else
              redis.call('SADD', P .. ':hostsites:' .. host, site)
              if redis.call('SADD', P .. ':unresolved', host) == 1 then
                table.insert(unresolved, host)
              end
            end
          end
        end
      end
    end
  end
  redis.call('HSET', CK, 'insites', insites)
  return moved
end

local function pick()
  while true do
    local r = redis.call('ZRANGEBYSCORE', P .. ':ready', '-inf', now, 'LIMIT', 0, 1)
    if #r == 0 then return nil end
    local ip = r[1]
    local ipkey = P .. ':ipsites:' .. ip
    local site = redis.call('LMOVE', ipkey, ipkey, 'LEFT', 'RIGHT')
    if not site then
      redis.call('ZREM', P .. ':ready', ip)
    else
      local skey = P .. ':site:' .. site
      local rec = redis.call('LPOP', skey)
      if redis.call('LLEN', skey) == 0 then redis.call('LREM', ipkey, -1, site) end
      if rec then
        count('insites', -1) count('queued', -1) count('leased', 1)
        redis.call('HINCRBY', P .. ':busy', ip, 1)
        redis.call('HINCRBY', P .. ':held:' .. worker, ip, 1)
        local id = tostring(lid) lid = lid + 1
        redis.call('HSET', P .. ':lease:' .. worker, id, ip .. '\t' .. site .. '\t' .. rec)
        place(ip, conn)
        return {id, ip, string.sub(rec, 2)}
      end
      place(ip, conn)
    end
  end
end

-- refill only when no loaded site can go (as the local scheduler): refilling to complete a
-- batch would re-read a crowded site's wait list on every pop
local refilled = false
while #out < want do
  local got = pick()
  if got then table.insert(out, got)
  elseif refilled or #out > 0
      or tonumber(redis.call('HGET', CK, 'insites') or '0') >= mem_limit then break
  else refill() refilled = true end
end
local nxt = redis.call('ZRANGE', P .. ':ready', 0, 0, 'WITHSCORES')
local wait = -1
if #nxt > 0 then wait = math.max(0, tonumber(nxt[2]) - now) end
return {out, unresolved, wait, tonumber(redis.call('HGET', CK, 'queued') or '0'),
        stats.dropped, stats.to_wait}
"""

# ARGV: prefix, worker, ip, delay ms, dead (0/1), conn
_RELEASE = _COMMON + r"""
local worker, ip, delay = ARGV[2], ARGV[3], tonumber(ARGV[4])
local dead, conn = ARGV[5] == '1', tonumber(ARGV[6])
local hkey = P .. ':held:' .. worker
local held = tonumber(redis.call('HGET', hkey, ip) or '0')
if held <= 0 then return -1 end  -- reaped meanwhile: the IP was already freed
if held == 1 then redis.call('HDEL', hkey, ip) else redis.call('HINCRBY', hkey, ip, -1) end
if redis.call('HINCRBY', P .. ':busy', ip, -1) <= 0 then redis.call('HDEL', P .. ':busy', ip) end
local at = math.max(tonumber(redis.call('HGET', P .. ':readyat', ip) or '0'), now + delay)
redis.call('HSET', P .. ':readyat', ip, at)
local dropped = 0
if dead then
  redis.call('SADD', P .. ':deadips', ip)
  local ipkey = P .. ':ipsites:' .. ip
  for _, site in ipairs(redis.call('LRANGE', ipkey, 0, -1)) do
    dropped = dropped + drop_site(site)
    redis.call('HSET', P .. ':dns', host_of_site(site), '!noconnection')
  end
  redis.call('DEL', ipkey)
end
place(ip, conn)
return dropped
"""

# ARGV: prefix, host, ip or "!reason", conn
_RESOLVED = _COMMON + r"""
local host, val, conn = ARGV[2], ARGV[3], tonumber(ARGV[4])
if string.sub(val, 1, 1) ~= '!' and redis.call('SISMEMBER', P .. ':deadips', val) == 1 then
  val = '!noconnection'
end
local known = redis.call('HGET', P .. ':dns', host)
if known then val = known end  -- the first answer stored wins: one IP per host for everyone
redis.call('HSET', P .. ':dns', host, val)
redis.call('SREM', P .. ':unresolved', host)
local hkey = P .. ':hostsites:' .. host
local sites = redis.call('SMEMBERS', hkey)
redis.call('DEL', hkey)
local dropped = 0
for _, site in ipairs(sites) do
  if string.sub(val, 1, 1) == '!' then dropped = dropped + drop_site(site)
  elseif redis.call('LLEN', P .. ':site:' .. site) > 0 then link(site, val, conn) end
end
return {val, dropped}
"""

# ARGV: prefix, worker, seen key, shard bits, seeds key, n acks, lease ids...,
#       then per entry: tier, number of bit positions, positions..., entry
_ADMIT = _COMMON + BITS_LUA + r"""
local worker, seen, shard_bits = ARGV[2], ARGV[3], tonumber(ARGV[4])
local seeds_pending = ARGV[5]
local i = 6
local nacks = tonumber(ARGV[i]) i = i + 1
local new, filtered = 0, 0
while i <= #ARGV - nacks do
  local tier, npos = ARGV[i], tonumber(ARGV[i + 1])
  local first = i + 2
  local is_new = npos == 0 or test_and_set(seen, shard_bits, ARGV, first, npos)
  i = first + npos
  if is_new then
    redis.call('RPUSH', P .. ':tier:' .. tier, ARGV[i])
    new = new + 1
  else
    filtered = filtered + 1
  end
  i = i + 1
end
local lkey = P .. ':lease:' .. worker
for j = #ARGV - nacks + 1, #ARGV do
  count('leased', -redis.call('HDEL', lkey, ARGV[j]))
end
if new > 0 then count('queued', new) end
if seeds_pending ~= '' then redis.call('DEL', seeds_pending) end
return {new, filtered}
"""

# ARGV: prefix, worker, timeout ms (or -1: retire this worker now), conn, start-urls key
_REAP = _COMMON + r"""
local me, timeout, conn, start = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local workers = P .. ':workers'
local gone
if timeout < 0 then gone = {me}
else
  redis.call('ZADD', workers, now, me)
  gone = redis.call('ZRANGEBYSCORE', workers, '-inf', now - timeout)
end
local requeued = 0
for _, w in ipairs(gone) do
  local lkey = P .. ':lease:' .. w
  local leases = redis.call('HGETALL', lkey)
  for k = 2, #leases, 2 do requeued = requeued + requeue(leases[k], conn) end
  redis.call('DEL', lkey)
  free_ips(w, conn)
  local pending = P .. ':seeds:' .. w
  while redis.call('LMOVE', pending, start, 'LEFT', 'LEFT') do end
  redis.call('ZREM', workers, w)
end
return {requeued, #gone}
"""

# Seeds the scrapy-redis way, moved to a per-worker list until their requests are admitted.
# ARGV: prefix, worker, start-urls key, count (in a Redis Cluster the start-urls key must
# share the prefix's hash tag)
_TAKE_SEEDS = r"""
local pending = ARGV[1] .. ':seeds:' .. ARGV[2]
local out = {}
for _ = 1, tonumber(ARGV[4]) do
  local v = redis.call('LMOVE', ARGV[3], pending, 'LEFT', 'RIGHT')
  if not v then break end
  table.insert(out, v)
end
return out
"""


def _two_ints(reply: list[Any]) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


def _resolved_reply(reply: list[Any]) -> tuple[str, int]:
    return reply[0].decode(), int(reply[1])


def _popped(reply: list[Any]) -> Popped:
    out, unresolved, wait, queued, dropped, to_wait = reply
    return Popped(
        leases=[(lid.decode(), ip.decode(), rec) for lid, ip, rec in out],
        unresolved=[h.decode() for h in unresolved],
        wait=None if int(wait) < 0 else int(wait) / 1000,
        queued=int(queued),
        dropped=int(dropped),
        to_wait=int(to_wait),
    )


@dataclass(slots=True)
class Popped:
    """What one ``pop`` returned."""

    leases: list[tuple[str, str, bytes]] = field(default_factory=list)  # (lease id, ip, record)
    unresolved: list[str] = field(default_factory=list)  # hosts this worker should resolve
    wait: float | None = None  # seconds until the next IP is ready (None: no IP has work)
    queued: int = 0  # records queued in the whole frontier after the pop
    dropped: int = 0  # records of dead hosts dropped by the sequencer
    to_wait: int = 0  # records moved to a wait list (site at its cap)


class RedisFrontier:
    """The shared frontier's keys and atomic operations (see the module docstring)."""

    def __init__(
        self,
        server: Redis,
        prefix: str,
        *,
        max_per_site: int = 40,
        loaded_sites: int = 2000,
        connections: int = 1,
        refill_budget: int = 256,
    ) -> None:
        self.server = server
        self.prefix = prefix
        self.max_per_site = max_per_site
        self.mem_limit = max(1, loaded_sites) * max_per_site
        self.connections = max(1, connections)
        self.refill_budget = refill_budget
        self._pop = server.register_script(_POP)
        self._release = server.register_script(_RELEASE)
        self._resolved = server.register_script(_RESOLVED)
        self._admit = server.register_script(_ADMIT)
        self._reap = server.register_script(_REAP)
        self._take_seeds = server.register_script(_TAKE_SEEDS)

    @staticmethod
    def entry(site: str, host: str, record: bytes) -> bytes:
        """A tier entry: the record alone when the scripts derive the same site and host from
        its URL (``split_entry``), else ``site \\t host \\t record``."""
        m = _DERIVABLE(record)
        if m is not None:
            scheme, name, port = m.groups()
            if (name == host.encode() and site.encode()
                    == b"%s://%s:%s" % (scheme, name, port or _DEFAULT_PORT[scheme])):
                return record
        return f"{site}\t{host}\t".encode() + record

    def _call(self, script: Script, args: list[Any], parse: Callable[[Any], Any]) -> Call:
        return Call.script_call(script, self.prefix, [self.prefix, *args], parse)

    def admit_call(
        self,
        worker: str,
        seen_key: str,
        shard_bits: int,
        entries: list[tuple[int, list[int], bytes]],
        acks: Sequence[str] = (),
        seeds_done: bool = False,
    ) -> Call:
        """Test-and-set each entry's bits; queue the new ones; then ack ``acks``. Atomic.
        Its result: (new, filtered)."""
        args: list[Any] = [worker, seen_key, shard_bits,
                           f"{self.prefix}:seeds:{worker}" if seeds_done else "", len(acks)]
        for tier, positions, entry in entries:
            args += [tier, len(positions), *positions, entry]
        args += list(acks)
        return self._call(self._admit, args, _two_ints)

    def admit(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return cast("tuple[int, int]", run_call(self.server, self.admit_call(*args, **kwargs)))

    def pop_call(self, worker: str, want: int, first_lease: int) -> Call:
        """Lease up to ``want`` records (``Popped``)."""
        return self._call(self._pop, [worker, want, self.connections, self.mem_limit,
                                      self.max_per_site, self.refill_budget, first_lease],
                          _popped)

    def pop(self, worker: str, want: int, first_lease: int) -> Popped:
        return cast("Popped", run_call(self.server, self.pop_call(worker, want, first_lease)))

    def release_call(self, worker: str, ip: str, delay: float, dead: bool = False) -> Call:
        """The fetch on ``ip`` ended: the IP is ready again ``delay`` s from now (Redis time).
        Its result: the records dropped with a dead IP (-1: the lease was reaped)."""
        return self._call(self._release, [worker, ip, max(0, round(delay * 1000)), int(dead),
                                          self.connections], int)

    def release(self, worker: str, ip: str, delay: float, dead: bool = False) -> int:
        return cast("int", run_call(self.server, self.release_call(worker, ip, delay, dead)))

    def resolved_call(self, host: str, ip: str | None, reason: str = "dns") -> Call:
        """Store ``host``'s IP (or its failure) and make its waiting sites servable."""
        return self._call(self._resolved, [host, ip or f"!{reason}", self.connections],
                          _resolved_reply)

    def resolved(self, host: str, ip: str | None, reason: str = "dns") -> tuple[str, int]:
        return cast("tuple[str, int]", run_call(self.server,
                                                self.resolved_call(host, ip, reason)))

    def heartbeat(self, worker: str, timeout: float, start_key: str) -> tuple[int, int]:
        """Record that ``worker`` lives; requeue the leases of workers silent for ``timeout``."""
        call = self._call(self._reap, [worker, round(timeout * 1000), self.connections,
                                       start_key], _two_ints)
        return cast("tuple[int, int]", run_call(self.server, call))

    def retire(self, worker: str, start_key: str) -> int:
        """A worker closes: its unacknowledged records go back, its IPs are freed."""
        call = self._call(self._reap, [worker, -1, self.connections, start_key], _two_ints)
        return cast("tuple[int, int]", run_call(self.server, call))[0]

    def take_seeds(self, worker: str, start_key: str, n: int) -> list[bytes]:
        return cast("list[bytes]", run_call(self.server, self._call(
            self._take_seeds, [worker, start_key, n], list)))

    def unresolved(self, n: int = 50) -> list[str]:
        hosts = cast("list[bytes]", self.server.srandmember(f"{self.prefix}:unresolved", n))
        return [h.decode() for h in hosts]

    def status(self, start_key: str) -> dict[str, int]:
        """Queued and leased records, seeds not yet read, live workers."""
        pipe = self.server.pipeline(transaction=False)
        pipe.hmget(f"{self.prefix}:count", "queued", "leased")
        pipe.llen(start_key)
        pipe.zcard(f"{self.prefix}:workers")
        (queued, leased), seeds, workers = pipe.execute()
        return {"queued": int(queued or 0), "leased": int(leased or 0), "seeds": int(seeds),
                "workers": int(workers)}

    def delete(self) -> int:
        """Remove every key of the frontier (a finished crawl with SCHEDULER_PERSIST off)."""
        keys = list(self.server.scan_iter(match=f"{self.prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            self.server.delete(*keys[i : i + 500])
        return len(keys)
