"""``RedisBitmapDupeFilter``: the seen-URL bitmap / Bloom filter as a Redis string (SETBIT).

larbin's ``testSet`` made atomic across workers: a Lua script tests the k bits of each URL and
sets them if any was clear, for all the links of a page in one round trip. The bit positions are
the local dupefilter's (``KHashBitSet.positions`` over the ``REQUEST_FINGERPRINTER_CLASS``
fingerprint), the size and k too (``LARBIN_DUPEFILTER_MODE``, ``_BITS``, ``_CAPACITY``,
``_ERROR_RATE``), so a URL has the same positions in both; only the byte layout differs (Redis
numbers bits from the high bit of byte 0).

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.request import RequestFingerprinter

from larbinscrapy.distributed.connection import connector
from larbinscrapy.distributed.jobs import Call, LuaScript, run_call
from larbinscrapy.seen.bitset import KHashBitSet, bloom_size
from larbinscrapy.seen.dupefilter import CountingDupeFilter

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from redis import Redis
    from scrapy.crawler import Crawler
    from scrapy.http import Request
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)

SHARD_BITS = 32  # one Redis string holds at most 2^32 bits

# test_and_set(key, shard_bits, argv, first, n): larbin's testSet over argv[first .. first+n-1].
# Returns true when the URL is new (some bit was clear), after setting all its bits.
BITS_LUA = r"""
local function bitkey(seen, shard_bits, pos)
  if shard_bits == 0 then return seen, pos end
  local size = 2 ^ shard_bits
  return seen .. ':' .. math.floor(pos / size), pos % size
end
local function test_and_set(seen, shard_bits, argv, first, n)
  local new = false
  for j = first, first + n - 1 do
    local key, off = bitkey(seen, shard_bits, tonumber(argv[j]))
    if redis.call('SETBIT', key, off, 1) == 0 then new = true end
  end
  return new
end
"""

_MANY = (
    BITS_LUA
    + r"""
local seen, shard_bits, k = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, k do
  out[#out + 1] = test_and_set(seen, shard_bits, ARGV, i, k) and 1 or 0
end
return out
"""
)


class RedisBitmapDupeFilter(CountingDupeFilter):
    """Shared seen-URL bits in Redis, with a local cache for the link gate (module docstring).

    Settings: ``REDIS_URL`` (scrapy-redis), ``LARBIN_REDIS_DUPEFILTER_KEY``,
    ``LARBIN_DUPEFILTER_MODE``, ``_BITS``, ``_CAPACITY``, ``_ERROR_RATE``; ``DUPEFILTER_DEBUG``.
    """

    def __init__(
        self,
        server: Redis,
        key: str,
        *,
        mode: str = "bloom",
        bits: int = 64_000_000,
        capacity: int = 10_000_000,
        error_rate: float = 0.001,
        debug: bool = False,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        stats: StatsCollector | None = None,
    ) -> None:
        if mode not in ("bitmap", "bloom"):
            raise ValueError(f"LARBIN_DUPEFILTER_MODE must be 'bitmap' or 'bloom', got {mode!r}")
        m, k = (bits, 1) if mode == "bitmap" else bloom_size(capacity, error_rate)
        self.server = server
        self.key_template = key
        self.key = key
        self.mode = mode
        self.local = KHashBitSet(m, k)  # the generic class: positions() for every k
        self.m, self.k = m, k
        self.shard_bits = SHARD_BITS if m > 2**SHARD_BITS else 0
        # The gate's per-link test: local bits only (subset of Redis's), see the docstring.
        self.seen_fingerprint = self.local.test_and_set
        self.knows_fingerprint = self.local.__contains__  # the test without the set
        self.positions = self.local.positions
        self.fingerprinter: RequestFingerprinterProtocol = fingerprinter or RequestFingerprinter()
        self.debug = debug
        self.stats = stats
        self.filtered = 0
        self._logdupes = True
        self._many = LuaScript(_MANY)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        s = crawler.settings
        key = s["LARBIN_REDIS_DUPEFILTER_KEY"]
        spider = getattr(crawler, "spidercls", None)
        if spider is None or not getattr(spider, "name", None):
            raise NotConfigured("RedisBitmapDupeFilter needs the spider's name for its key")
        return cls(
            connector(s)[0],  # None on a Redis Cluster: the scheduler owns the connection
            key % {"spider": spider.name, "name": spider.name},
            mode=s.get("LARBIN_DUPEFILTER_MODE"),
            bits=s.getint("LARBIN_DUPEFILTER_BITS"),
            capacity=s.getint("LARBIN_DUPEFILTER_CAPACITY"),
            error_rate=s.getfloat("LARBIN_DUPEFILTER_ERROR_RATE"),
            debug=s.getbool("DUPEFILTER_DEBUG"),
            fingerprinter=crawler.request_fingerprinter,
            stats=crawler.stats,
        )

    # --- the checks ----------------------------------------------------------------------
    seen_fingerprint: Callable[[bytes], bool]  # the local bits' test_and_set, set in __init__

    def request_positions(self, request: Request) -> list[int]:
        """The bit positions of a request's fingerprint (what ``RedisFrontier.admit`` tests)."""
        return self.local.positions(self.fingerprinter.fingerprint(request))

    def test_and_set_many(self, fps: list[bytes]) -> list[bool]:
        """Seen flags of ``fps`` from Redis, marking them all seen: one round trip."""
        if not fps:
            return []
        args: list[Any] = [self.shard_bits, self.k]
        for fp in fps:
            args += self.local.positions(fp)
            self.local.test_and_set(fp)
        if self.server is None:
            raise NotConfigured(
                "request_seen is not available on a Redis Cluster: use "
                "RedisScheduler, which tests the seen bits in its admits"
            )
        return [
            not new for new in run_call(self.server, Call.script_call(self._many, self.key, args))
        ]

    def request_seen(self, request: Request) -> bool:
        return self.test_and_set_many([self.fingerprinter.fingerprint(request)])[0]

    # --- lifecycle -----------------------------------------------------------------------
    def bits_set(self) -> int:
        if not self.shard_bits:
            return int(self.server.bitcount(self.key))
        shards = -(-self.m // 2**self.shard_bits)
        return sum(int(self.server.bitcount(f"{self.key}:{i}")) for i in range(shards))

    def close(self, reason: str = "") -> None:
        if self.stats is None:
            return
        self.report_bits(self.bits_set())

    def report_bits(self, count: int) -> None:
        """Fill stats from ``bits_set()`` (which ``RedisScheduler`` runs in its Redis thread)."""
        if self.stats is None:
            return
        fill = count / self.m
        self.stats.set_value("larbin/dupefilter/bits_set", count)
        self.stats.set_value("larbin/dupefilter/fill_ratio", fill)
        self.stats.set_value("larbin/dupefilter/estimated_fp_rate", fill**self.k)
