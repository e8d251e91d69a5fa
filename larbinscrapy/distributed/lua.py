"""The Lua of ``RedisFrontier`` (``frontier.py`` says what each step does and why).

Every script is sent with the frontier's counters key ``P:count`` as ``KEYS[1]`` (it routes the
call to the shard's master in a Redis Cluster) and the prefix ``P`` as ``ARGV[1]``; every key it
touches starts with that prefix, so it touches one slot. One clock for all workers: ``TIME``.
"""

from __future__ import annotations

from larbinscrapy.distributed.dupefilter import BITS_LUA
from larbinscrapy.distributed.hostlua import ASIDE_LUA, HOST_ENDED_LUA, HOSTS_LUA
from larbinscrapy.distributed.jobs import LuaScript

# Shared by every script: the clock, counters and the IP placement rule.
_COMMON = r"""
local P = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local CK = P .. ':count'
local function count(field, n)  -- n ~= 0: Lua's -0 is not an integer to Redis
  if n ~= 0 then redis.call('HINCRBY', CK, field, n) end
end
local function host_of_site(site)
  return string.match(site, '^[^:]+://%[?([^%]/]-)%]?:?%d*$') or site
end
-- ``host`` (optional) may be asked at ``hat``: if it is the IP's one site's host, so is the IP
local function place(ip, conn, host, hat)
  local ready = P .. ':ready'
  local ipkey = P .. ':ipsites:' .. ip
  local sites = redis.call('LLEN', ipkey)
  if sites == 0 or redis.call('SISMEMBER', P .. ':deadips', ip) == 1 then
    redis.call('ZREM', ready, ip) return
  end
  local busy = tonumber(redis.call('HGET', P .. ':busy', ip) or '0')
  if busy >= conn then redis.call('ZREM', ready, ip) return end
  local at = tonumber(redis.call('HGET', P .. ':readyat', ip) or '0')
  if host and sites == 1 and hat > at
     and host_of_site(redis.call('LINDEX', ipkey, 0)) == host then
    at = hat
  end
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
  redis.call('HDEL', P .. ':head', site)
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
-- Put a leased record back at the front of its site list (a reaped or returned lease).
local function requeue(v, conn)
  local ip, site, rec = string.match(v, '^([^\t]*)\t([^\t]*)\t(.*)$')
  count('leased', -1)
  redis.call('DEL', P .. ':hold:' .. host_of_site(site))  -- no fetch of it in flight now
  if redis.call('SISMEMBER', P .. ':deadips', ip) == 1 then return 0 end
  local skey = P .. ':site:' .. site
  if redis.call('LPUSH', skey, rec) == 1 then link(site, ip, conn) end
  if string.byte(rec, 1) == 48 then redis.call('HINCRBY', P .. ':head', site, 1) end
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

# ARGV: prefix, worker, want, conn, mem_limit, cap, budget, first lease id, hold ms
_POP_TEXT = (
    _COMMON
    + HOSTS_LUA
    + r"""
local worker, want, conn = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local mem_limit, cap, budget = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local lid, hold = tonumber(ARGV[8]), tonumber(ARGV[9])
local out, unresolved = {}, {}
redis.call('ZADD', P .. ':workers', 'NX', now, worker)  -- a lease needs a heartbeat to expire
local stats = {dropped = 0, to_wait = 0, aside = 0}

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
      if ip == '!throttled' then  -- a host set aside (ASIDE)
        count('queued', -1) stats.aside = stats.aside + 1
      elseif ip and string.sub(ip, 1, 1) == '!' then
        count('queued', -1) stats.dropped = stats.dropped + 1
      else
        local skey = P .. ':site:' .. site
        local n = redis.call('LLEN', skey)
        -- the priority tier goes ahead of the site's others (in its order), up to the cap
        local head = (tier == 0) and tonumber(redis.call('HGET', P .. ':head', site) or '0')
        if not (head and head < cap) and n >= cap then
          local wait = (tier < 2) and 1 or 3
          redis.call('RPUSH', P .. ':tier:' .. wait, e)
          stats.to_wait = stats.to_wait + 1
        else
          local front = head and head < cap
          local pivot = front and head > 0 and redis.call('LINDEX', skey, head - 1)
          if not front then redis.call('RPUSH', skey, tier .. rec)
          elseif pivot then redis.call('LINSERT', skey, 'AFTER', pivot, tier .. rec)
          else redis.call('LPUSH', skey, tier .. rec) end
          if front then redis.call('HINCRBY', P .. ':head', site, 1) end
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

-- The IP's next site in turn whose host may be asked now (round robin, as the local IpRing):
-- each site looked at goes to the end of the list. None ready: nil and when the first is.
local function ready_site(ipkey)
  local site = redis.call('LMOVE', ipkey, ipkey, 'LEFT', 'RIGHT')
  if not site then return nil end
  local at = host_when(host_of_site(site), hold)
  if at <= now then return site end
  local first = at
  for _ = 2, redis.call('LLEN', ipkey) do
    site = redis.call('LMOVE', ipkey, ipkey, 'LEFT', 'RIGHT')
    at = host_when(host_of_site(site), hold)
    if at <= now then return site end
    if at < first then first = at end
  end
  return nil, first
end

local function pick()
  while true do
    local r = redis.call('ZRANGEBYSCORE', P .. ':ready', '-inf', now, 'LIMIT', 0, 1)
    if #r == 0 then return nil end
    local ip = r[1]
    local ipkey = P .. ':ipsites:' .. ip
    local site, later = ready_site(ipkey)
    if later then  -- only its hosts cool: the IP is asked again when the first is ready
      redis.call('ZADD', P .. ':ready', later, ip)
    elseif not site then
      redis.call('ZREM', P .. ':ready', ip)
    else
      local skey = P .. ':site:' .. site
      local rec = redis.call('LPOP', skey)
      if redis.call('LLEN', skey) == 0 then redis.call('LREM', ipkey, -1, site) end
      if rec and string.byte(rec, 1) == 48
         and redis.call('HINCRBY', P .. ':head', site, -1) <= 0 then
        redis.call('HDEL', P .. ':head', site)
      end
      if rec then
        count('insites', -1) count('queued', -1) count('leased', 1)
        redis.call('HINCRBY', P .. ':busy', ip, 1)
        redis.call('HINCRBY', P .. ':held:' .. worker, ip, 1)
        local id = tostring(lid) lid = lid + 1
        redis.call('HSET', P .. ':lease:' .. worker, id, ip .. '\t' .. site .. '\t' .. rec)
        if hold > 0 then redis.call('SET', P .. ':hold:' .. host_of_site(site), 1, 'PX', hold) end
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
        stats.dropped, stats.to_wait, stats.aside}
"""
)

# One connection of ``worker`` on ``ip`` ends: the IP is ready again ``delay`` ms from now.
_FREE_ONE = r"""
local function free_one(worker, ip, delay)
  local hkey = P .. ':held:' .. worker
  local held = tonumber(redis.call('HGET', hkey, ip) or '0')
  if held <= 0 then return false end  -- reaped meanwhile: the IP was already freed
  if held == 1 then redis.call('HDEL', hkey, ip) else redis.call('HINCRBY', hkey, ip, -1) end
  if redis.call('HINCRBY', P .. ':busy', ip, -1) <= 0 then redis.call('HDEL', P .. ':busy', ip) end
  local at = math.max(tonumber(redis.call('HGET', P .. ':readyat', ip) or '0'), now + delay)
  redis.call('HSET', P .. ':readyat', ip, at)
  return true
end
"""

# ARGV: prefix, worker, ip, IP delay ms, dead (0/1), conn, host ("" none), host delay ms,
# outcome (a, b, t or ""), back-off base ms, back-off max ms, max in a row, jitter factor,
# hold (1: the host's fetch in flight is marked, ``P:hold:<host>``).
# Returns {records dropped with a dead IP (-1: the lease was reaped), records dropped with the
# host set aside (-1: not set aside now), the back-off pause ms}.
_RELEASE_TEXT = (
    _COMMON
    + HOSTS_LUA
    + ASIDE_LUA
    + HOST_ENDED_LUA
    + _FREE_ONE
    + r"""
local worker, ip, delay = ARGV[2], ARGV[3], tonumber(ARGV[4])
local dead, conn = ARGV[5] == '1', tonumber(ARGV[6])
local host, hdelay, outcome = ARGV[7], tonumber(ARGV[8]), ARGV[9]
if ARGV[14] == '1' then redis.call('DEL', P .. ':hold:' .. host) end
local pause, aside, hat = 0, -1, 0
if host ~= '' then  -- the host level first: a reaped lease's fetch happened too
  pause, aside, hat = host_ended(host, hdelay, outcome, conn, tonumber(ARGV[10]),
                            tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13]))
end
if not free_one(worker, ip, math.max(delay, pause)) then return {-1, aside, pause} end
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
place(ip, conn, host, hat)
return {dropped, aside, pause}
"""
)

# A leased record goes back to the front of its site list and its IP connection is freed,
# ready again in ``wait`` ms: the IP's own lease (iplease.py) was taken by another shard.
# ARGV: prefix, worker, lease id, wait ms, conn
_GIVEBACK_TEXT = (
    _COMMON
    + _FREE_ONE
    + r"""
local worker, lid, wait, conn = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local lkey = P .. ':lease:' .. worker
local v = redis.call('HGET', lkey, lid)
if not v then return 0 end
redis.call('HDEL', lkey, lid)
local ip = string.match(v, '^([^\t]*)')
free_one(worker, ip, wait)
requeue(v, conn)
place(ip, conn)
return 1
"""
)

# ARGV: prefix, host, ip or "!reason", conn
_RESOLVED_TEXT = (
    _COMMON
    + r"""
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
)

# A host set aside (a throttling answer past LARBIN_THROTTLE_RETRY_AFTER_MAX) for every worker
# (``ASIDE_LUA``). ARGV: prefix, host, conn. Its result: the records dropped.
_ASIDE_TEXT = (
    _COMMON
    + ASIDE_LUA
    + r"""
local host, conn = ARGV[2], tonumber(ARGV[3])
return math.max(0, set_aside(host, conn))
"""
)

# A fetch outside the frontier (a sitemap) takes an IP connection like a pop: 0 when taken
# (released as any lease), else the ms to wait (-1: every connection is leased). The host's
# own record holds it too. ARGV: prefix, worker, ip, conn, host, hold ms
_TAKE_TEXT = (
    _COMMON
    + HOSTS_LUA
    + r"""
local worker, ip, conn, host = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local hold = tonumber(ARGV[6])
redis.call('ZADD', P .. ':workers', 'NX', now, worker)  -- a lease needs a heartbeat to expire
if tonumber(redis.call('HGET', P .. ':busy', ip) or '0') >= conn then return -1 end
local at = math.max(tonumber(redis.call('HGET', P .. ':readyat', ip) or '0'), host_at(host))
if at > now then return at - now end
if hold > 0 then
  if redis.call('SET', P .. ':hold:' .. host, 1, 'PX', hold, 'NX') == false then return -1 end
end
redis.call('HINCRBY', P .. ':busy', ip, 1)
redis.call('HINCRBY', P .. ':held:' .. worker, ip, 1)
place(ip, conn)
return 0
"""
)

# ARGV: prefix, worker, seen key, shard bits, seeds key, n acks, lease ids...,
#       then per entry: tier, number of bit positions, positions..., entry
_ADMIT_TEXT = (
    _COMMON
    + BITS_LUA
    + r"""
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
)

# ARGV: prefix, worker, timeout ms (or -1: retire this worker now), conn, start-urls key
_REAP_TEXT = (
    _COMMON
    + r"""
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
  if start ~= '' then  -- in a cluster the seed list is in another slot (seeds.py reaps it)
    local pending = P .. ':seeds:' .. w
    while redis.call('LMOVE', pending, start, 'LEFT', 'LEFT') do end
  end
  redis.call('ZREM', workers, w)
end
return {requeued, #gone}
"""
)

# Seeds the scrapy-redis way, moved to a per-worker list until their requests are admitted.
# ARGV: prefix, worker, start-urls key, count (in a Redis Cluster the start-urls key must
# share the prefix's hash tag)
_TAKE_SEEDS_TEXT = r"""
local pending = ARGV[1] .. ':seeds:' .. ARGV[2]
local out = {}
for _ = 1, tonumber(ARGV[4]) do
  local v = redis.call('LMOVE', ARGV[3], pending, 'LEFT', 'RIGHT')
  if not v then break end
  table.insert(out, v)
end
return out
"""


# Cluster: the seed list's own reaping, in its slot. ARGV: seed prefix, worker, timeout ms
# (or -1: this worker retires), start-urls key.
_SEEDS_REAP_TEXT = r"""
local P, me, timeout, start = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local zk = P .. ':seedworkers'
local gone
if timeout < 0 then gone = {me}
else
  redis.call('ZADD', zk, now, me)
  gone = redis.call('ZRANGEBYSCORE', zk, '-inf', now - timeout)
end
for _, w in ipairs(gone) do
  local pending = P .. ':seeds:' .. w
  while redis.call('LMOVE', pending, start, 'LEFT', 'LEFT') do end
  redis.call('ZREM', zk, w)
end
return #gone
"""

POP = LuaScript(_POP_TEXT)
RELEASE = LuaScript(_RELEASE_TEXT)
GIVEBACK = LuaScript(_GIVEBACK_TEXT)
RESOLVED = LuaScript(_RESOLVED_TEXT)
ADMIT = LuaScript(_ADMIT_TEXT)
REAP = LuaScript(_REAP_TEXT)
TAKE_SEEDS = LuaScript(_TAKE_SEEDS_TEXT)
SEEDS_REAP = LuaScript(_SEEDS_REAP_TEXT)
ASIDE = LuaScript(_ASIDE_TEXT)
TAKE = LuaScript(_TAKE_TEXT)
