"""``NearIndex``: the simhash near-duplicate index shared by every worker (in Redis).

Pigeonhole: a 64-bit simhash is cut into ``distance + 1`` blocks (``contentdup.simhash_blocks``,
the local ``SimhashIndex``'s split); two simhashes within ``distance`` bits agree on one block at
least. A bucket holds the kept pages of one (block index, block value): a check reads the
page's ``distance + 1`` buckets only, and the Lua script computes the full Hamming distance of
each candidate (two 32-bit halves, Redis Lua's ``bit`` library), never a scan of the index.

Storage: buckets are fields of a Redis hash, ``<contentdup key>:near`` (field = block index byte
+ block value bytes); the value is the bucket's entries, 17 bytes each: simhash (8), the URL's
``url_key`` (8, so a page fetched again is not its own copy), state (``K`` kept, ``T`` not yet
settled, on a cluster only).

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import xxhash

from larbinscrapy.distributed.jobs import Call, LuaScript
from larbinscrapy.distributed.shards import spread_tags
from larbinscrapy.pipelines.contentdup import simhash_blocks, url_key

if TYPE_CHECKING:
    from collections.abc import Sequence

KEPT = b"K"  # an entry's state byte once its page's verdict is settled ("T" before)

# pop32(x): bits set in a 32-bit value (bit ops only: Lua numbers are doubles); the low half
# is compared only when the high one is within the distance
_POPCOUNT = r"""
local function pop32(x)
  x = x - bit.band(bit.rshift(x, 1), 0x55555555)
  x = bit.band(x, 0x33333333) + bit.band(bit.rshift(x, 2), 0x33333333)
  x = bit.band(x + bit.rshift(x, 4), 0x0F0F0F0F)
  x = x + bit.rshift(x, 8)
  x = x + bit.rshift(x, 16)
  return bit.band(x, 0x3F)
end
-- within(bucket, p, ...): the distance of the entry at p if it is at most d, else nil
local function within(bucket, p, hi, lo, d)
  local h, l = struct.unpack('>I4I4', bucket, p)
  local n = pop32(bit.bxor(h, hi))
  if n > d then return nil end
  n = n + pop32(bit.bxor(l, lo))
  if n > d then return nil end
  return n
end
"""

# One Redis. KEYS: content hashes, near buckets. ARGV: digest, url, entry (simhash + url key,
# empty without a simhash), distance, fields. {1, first url} | {2, distance} | {0}: kept, added.
_CHECK_ONE = (
    _POPCOUNT
    + r"""
local first = redis.call('HGET', KEYS[1], ARGV[1])
if first then return {1, first} end
local buckets = {}
if ARGV[3] ~= '' then
  local hi, lo = struct.unpack('>I4I4', ARGV[3])
  local ukey, d = string.sub(ARGV[3], 9, 16), tonumber(ARGV[4])
  for i = 5, #ARGV do
    local bucket = redis.call('HGET', KEYS[2], ARGV[i]) or ''
    for p = 1, #bucket, 17 do
      local dist = within(bucket, p, hi, lo, d)
      if dist and string.sub(bucket, p + 8, p + 15) ~= ukey then return {2, dist} end
    end
    buckets[i] = bucket
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
for i = 5, #ARGV do
  redis.call('HSET', KEYS[2], ARGV[i], buckets[i] .. ARGV[3] .. 'K')
end
return {0}
"""
)

# A cluster, one slot. KEYS: its near buckets. ARGV: entry, distance, fields. Adds the entry
# (state T) to each bucket; returns {field index, twin's simhash, distance, state} per twin.
_CHECK_SLOT = (
    _POPCOUNT
    + r"""
local hi, lo = struct.unpack('>I4I4', ARGV[1])
local ukey, d = string.sub(ARGV[1], 9, 16), tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV do
  local bucket = redis.call('HGET', KEYS[1], ARGV[i]) or ''
  local mine = false
  for p = 1, #bucket, 17 do
    if string.sub(bucket, p, p + 15) == ARGV[1] then mine = true
    elseif string.sub(bucket, p + 8, p + 15) ~= ukey then
      local dist = within(bucket, p, hi, lo, d)
      if dist then
        table.insert(out, i - 3)
        table.insert(out, string.sub(bucket, p, p + 7))
        table.insert(out, dist)
        table.insert(out, string.sub(bucket, p + 16, p + 16))
      end
    end
  end
  if not mine then redis.call('HSET', KEYS[1], ARGV[i], bucket .. ARGV[1] .. 'T') end
end
return out
"""
)

# A cluster, one slot. KEYS: its near buckets. ARGV: entry, 'K' (kept) or '' (remove), fields.
_SETTLE = r"""
for i = 3, #ARGV do
  local bucket = redis.call('HGET', KEYS[1], ARGV[i])
  if bucket then
    for p = 1, #bucket, 17 do
      if string.sub(bucket, p, p + 15) == ARGV[1] then
        local rest = string.sub(bucket, p + 17)
        bucket = string.sub(bucket, 1, p - 1) .. (ARGV[2] ~= '' and ARGV[1] .. 'K' or '') .. rest
        if bucket == '' then redis.call('HDEL', KEYS[1], ARGV[i])
        else redis.call('HSET', KEYS[1], ARGV[i], bucket) end
        break
      end
    end
  end
end
return 0
"""

# A cluster. KEYS: content hashes. ARGV: digest, url: the page claimed it, then lost as a
# near-duplicate: its copies (and itself fetched again) are dropped too.
_MARK_COPY = r"""
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], '\0' .. ARGV[2])
end
return 0
"""

COPY_MARK = "\0"  # before the URL of a page dropped as a near-duplicate (cluster only)


class Verdict(NamedTuple):
    """``kind``: ``kept``, ``dup`` (``detail``: the first URL) or ``near`` (the distance)."""

    kind: str
    detail: Any = None


class Twin(NamedTuple):
    """A stored simhash within the distance, reported by one cluster slot's script."""

    block: int
    simhash: int
    distance: int
    settled: bool


_DUP, _NEAR = 1, 2  # _CHECK_ONE's reply codes


def _check_one_reply(reply: list[Any]) -> Verdict:
    if reply[0] == _DUP:
        return Verdict("dup", reply[1].decode("utf-8", "replace"))
    if reply[0] == _NEAR:
        return Verdict("near", int(reply[1]))
    return Verdict("kept")


class NearIndex:
    """Block split, bucket placement and the calls of the shared near-duplicate index."""

    def __init__(self, key: str, distance: int, shards: int = 1) -> None:
        self.distance = distance
        self.blocks = simhash_blocks(distance)
        self._widths = [(mask.bit_length() + 7) // 8 for _, mask in self.blocks]
        self.keys = [f"{{{t}}}{key}" for t in spread_tags(shards)] if shards > 1 else [key]
        self._one = LuaScript(_CHECK_ONE)
        self._slot = LuaScript(_CHECK_SLOT)
        self._settle = LuaScript(_SETTLE)
        self._mark = LuaScript(_MARK_COPY)

    # -- pure ------------------------------------------------------------------------------
    def block_values(self, h: int) -> list[int]:
        return [h >> shift & mask for shift, mask in self.blocks]

    def fields(self, h: int) -> list[bytes]:
        """The bucket names of ``h``: block index + block value."""
        return [
            bytes([j]) + v.to_bytes(w, "big")
            for j, (v, w) in enumerate(zip(self.block_values(h), self._widths, strict=True))
        ]

    def key_of(self, field: bytes) -> str:
        """The hash a bucket lives in (a cluster: the shard its name hashes to)."""
        if len(self.keys) == 1:
            return self.keys[0]
        return self.keys[xxhash.xxh64_intdigest(field) % len(self.keys)]

    def home(self, a: int, b: int) -> int | None:
        """The first block ``a`` and ``b`` share (their pair's deciding bucket), or None."""
        for j, (va, vb) in enumerate(zip(self.block_values(a), self.block_values(b), strict=True)):
            if va == vb:
                return j
        return None

    @staticmethod
    def entry(h: int, url: str) -> bytes:
        return h.to_bytes(8, "big") + url_key(url).to_bytes(8, "big")

    def by_key(self, h: int) -> dict[str, list[tuple[int, bytes]]]:
        """``h``'s buckets grouped by the hash holding them: key -> [(block, field)]."""
        groups: dict[str, list[tuple[int, bytes]]] = {}
        for j, field in enumerate(self.fields(h)):
            groups.setdefault(self.key_of(field), []).append((j, field))
        return groups

    # -- one Redis -------------------------------------------------------------------------
    def check_call(self, exact_key: str, digest: bytes, url: str, h: int) -> Call:
        """The whole check of a page in one script: content hash, then near-twins; kept pages
        are added. ``h`` 0: no simhash (too short a text), the content hash only."""
        entry = self.entry(h, url) if h else b""
        fields = self.fields(h) if h else []
        return Call(
            (
                "EVALSHA",
                self._one.sha,
                2,
                exact_key,
                self.keys[0],
                digest,
                url,
                entry,
                self.distance,
                *fields,
            ),
            _check_one_reply,
            self._one,
        )

    # -- a cluster -------------------------------------------------------------------------
    def slot_calls(self, h: int, url: str) -> list[tuple[list[int], Call]]:
        """One script per slot: the blocks it checks, and the call (its reply: ``Twin``s)."""
        entry = self.entry(h, url)
        out = []
        for key, group in self.by_key(h).items():
            blocks = [j for j, _ in group]

            def parse(reply: list[Any], blocks: list[int] = blocks) -> list[Twin]:
                return [
                    Twin(
                        blocks[int(reply[i])],
                        int.from_bytes(reply[i + 1], "big"),
                        int(reply[i + 2]),
                        reply[i + 3] == KEPT,
                    )
                    for i in range(0, len(reply), 4)
                ]

            out.append(
                (
                    blocks,
                    Call(
                        (
                            "EVALSHA",
                            self._slot.sha,
                            1,
                            key,
                            entry,
                            self.distance,
                            *(f for _, f in group),
                        ),
                        parse,
                        self._slot,
                    ),
                )
            )
        return out

    def loses_to(self, h: int, twins: Sequence[Twin]) -> Twin | None:
        """The twin ``h`` loses to: one reported in their home bucket (module docstring)."""
        for twin in twins:
            if self.home(h, twin.simhash) == twin.block:
                return twin
        return None

    def settle_calls(self, h: int, url: str, kept: bool) -> list[Call]:
        """Mark ``h``'s entries kept, or remove them (the page lost)."""
        entry = self.entry(h, url)
        return [
            Call(
                (
                    "EVALSHA",
                    self._settle.sha,
                    1,
                    key,
                    entry,
                    "K" if kept else "",
                    *(f for _, f in group),
                ),
                script=self._settle,
            )
            for key, group in self.by_key(h).items()
        ]

    def mark_copy_call(self, exact_key: str, digest: bytes, url: str) -> Call:
        """The content hash ``url`` claimed now names a near-duplicate (dropped)."""
        return Call(("EVALSHA", self._mark.sha, 1, exact_key, digest, url), script=self._mark)
