"""The host level of the shared frontier's Lua (``lua.py`` includes these in its scripts).

``P:host:<host>`` (in the host's shard) holds when the host may be asked again and its
throttling run, as ``politeness.hosts.HostTable`` keeps them locally; ``P:hold:<host>`` marks a
host with a fetch in flight where an IP has several connections (``LARBIN_IP_DELAY`` 0).
"""

from __future__ import annotations

# A host's record ``P:host:<host>`` (its shard): "ms" (Redis time before which no worker may
# ask it: its delay or pause after its last fetch) or "ms n b" (and n throttling answers in a
# row, b the back-off in ms). It expires with what it holds (missing: ready, no run).
HOSTS_LUA = r"""
local function host_rec(host)
  local v = redis.call('GET', P .. ':host:' .. host)
  if not v then return 0, 0, 0 end
  local at, n, b = string.match(v, '^(%d+) ?(%d*) ?(%d*)$')
  return tonumber(at) or 0, tonumber(n) or 0, tonumber(b) or 0
end
local function host_at(host)
  local v = redis.call('GET', P .. ':host:' .. host)
  return v and tonumber(string.match(v, '^%d+')) or 0
end
-- host_at, but far ahead while a fetch of it is in flight (``hold`` > 0: marks are kept)
local function host_when(host, hold)
  local at = host_at(host)
  if hold > 0 and at <= now and redis.call('EXISTS', P .. ':hold:' .. host) == 1 then
    return now + 86400000
  end
  return at
end
"""

# A host set aside for every worker: its loaded sites dropped, its tier entries dropped as the
# sequencer meets them. The records dropped, or -1 when it was set aside already.
ASIDE_LUA = r"""
local function set_aside(host, conn)
  local ip = redis.call('HGET', P .. ':dns', host)
  if ip == '!throttled' then return -1 end
  redis.call('HSET', P .. ':dns', host, '!throttled')
  local dropped = 0
  if ip and string.sub(ip, 1, 1) ~= '!' then
    local ipkey = P .. ':ipsites:' .. ip
    for _, site in ipairs(redis.call('LRANGE', ipkey, 0, -1)) do
      if host_of_site(site) == host then
        dropped = dropped + drop_site(site)
        redis.call('LREM', ipkey, 0, site)
      end
    end
    place(ip, conn)
  end
  return dropped
end
"""

# The host's record after a fetch from it ended (``HOSTS_LUA``), as ``politeness.hosts``'s
# HostTable does it locally: a normal answer (a) ends the throttling run, a throttling answer
# without Retry-After (b) doubles the back-off, one with it (t) is counted; anything else keeps
# the run. Past ``maxrow`` answers in a row the host is set aside. Returns (back-off pause ms,
# records dropped with a host set aside now or -1).
HOST_ENDED_LUA = r"""
local function host_ended(host, hdelay, outcome, conn, base, maxb, maxrow, factor)
  local at, n, b = now + hdelay, 0, 0
  local pause, aside = 0, -1
  if outcome ~= 'a' then
    local _
    _, n, b = host_rec(host)
    if outcome == 'b' or outcome == 't' then
      n = n + 1
      if maxrow > 0 and n >= maxrow then
        aside = set_aside(host, conn)
      elseif outcome == 'b' then
        b = (b <= 0) and base or math.min(b * 2, maxb)
        pause = math.floor(b * factor)
        at = math.max(at, now + pause)
      end
    end
  end
  local key = P .. ':host:' .. host
  if n == 0 and b == 0 then
    if at > now then redis.call('SET', key, at, 'PX', at - now) else redis.call('DEL', key) end
  else  -- the run is kept while a back-off could still grow
    redis.call('SET', key, at .. ' ' .. n .. ' ' .. b, 'PX', at - now + math.max(1, maxb))
  end
  return pause, aside, at
end
"""
