"""robots.txt shared by every worker: one fetch per site for the whole crawl.

A site's rules (RFC 9309 state: verdict, failures in a row, and the body to parse) live under
``<shard prefix>:robots:<site>`` in the site's host's shard, expiring with the rules (``PX``:
``LARBIN_ROBOTS_TTL``, or the back-off of an unreachable robots.txt). A worker that finds no
rules takes ``...:robots:<site>:lease`` (``SET NX PX``) and fetches; the others poll until the
rules appear or the lease lapses (its holder died), then take it themselves. Every call is a
job of the worker's Redis thread (``jobs.py``): nothing blocks the reactor.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future

from larbinscrapy.distributed.jobs import Call, LuaScript, later
from larbinscrapy.parse.urls import host_of
from larbinscrapy.politeness.robotsrules import PARSE, SiteRules

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.distributed.jobs import RedisJobs
    from larbinscrapy.distributed.shards import Shards

logger = logging.getLogger(__name__)

WAIT = 0.1  # seconds between two looks at rules another worker is fetching

# KEYS: rules, lease. ARGV: worker, lease ms. The rules and their ms to live, or 1 (the lease
# is ours: fetch), or 0 (another worker is fetching).
_CLAIM = LuaScript("""
local v = redis.call('GET', KEYS[1])
if v then return {v, redis.call('PTTL', KEYS[1])} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[2]) == ARGV[1] then return 1 end
return 0
""")

# KEYS: rules, lease. ARGV: worker, rules or '' (nothing to share), ms to live.
_STORE = LuaScript("""
if ARGV[2] ~= '' and tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
""")


def encode(rules: SiteRules, body: bytes, now: float, wall: float) -> bytes:
    """The shared form of ``rules`` (clock ``now``) and the robots.txt ``body``: a JSON line
    (failing_since as a wall-clock time: clocks differ between workers) then the body."""
    since = None if rules.failing_since is None else wall - (now - rules.failing_since)
    head = {"verdict": rules.verdict, "errors": rules.errors, "since": since}
    return json.dumps(head).encode() + b"\n" + (body if rules.verdict == PARSE else b"")


def decode(value: bytes, ttl_ms: int, now: float, wall: float) -> tuple[SiteRules, bytes]:
    """``encode``'s inverse: rules expiring when the key does, on the local clock ``now``."""
    head, _, body = value.partition(b"\n")
    h = json.loads(head)
    since = None if h["since"] is None else now - (wall - float(h["since"]))
    return SiteRules(str(h["verdict"]), now + max(ttl_ms, 0) / 1000, int(h["errors"]), since), body


class SharedRobots:
    """A worker's access to the shared robots.txt rules (module docstring)."""

    def __init__(self, jobs: RedisJobs, shards: Shards, worker: str, lease_ms: int) -> None:
        self.jobs = jobs
        self.shards = shards
        self.worker = worker
        self.lease_ms = lease_ms

    def _keys(self, site: str) -> tuple[str, str]:
        key = f"{self.shards.prefix(self.shards.of(host_of(site)))}:robots:{site}"
        return key, key + ":lease"

    async def claim(
        self, site: str, now: Callable[[], float], wall: Callable[[], float]
    ) -> tuple[SiteRules, bytes] | None:
        """The shared rules of ``site``, waiting while another worker fetches them; None: ours
        to fetch (the lease is ours, or Redis failed: fetch without sharing)."""
        keys = self._keys(site)
        while True:
            reply = await maybe_deferred_to_future(
                self.jobs.submit_awaited(
                    "robots.txt look-up",
                    Call(
                        ("EVALSHA", _CLAIM.sha, 2, *keys, self.worker, self.lease_ms), script=_CLAIM
                    ),
                )
            )
            if reply is None or reply == 1:
                return None
            if isinstance(reply, list):
                return decode(reply[0], int(reply[1]), now(), wall())
            await maybe_deferred_to_future(later(WAIT))

    def store(
        self, site: str, rules: SiteRules, body: bytes | None, now: float, wall: float
    ) -> None:
        """Share ``rules`` (and the robots.txt ``body``) until they expire, and give the lease
        up; ``body`` None only gives the lease up (rules only this worker may trust)."""
        value = b"" if body is None else encode(rules, body, now, wall)
        ttl_ms = int((rules.expires - now) * 1000)
        self.jobs.submit(
            "robots.txt store",
            Call(
                ("EVALSHA", _STORE.sha, 2, *self._keys(site), self.worker, value, ttl_ms),
                script=_STORE,
            ),
        )
