"""``Shards``: which Redis Cluster slot holds a host's frontier, seen bits, IP leases and
revisit schedule.

A Lua script may touch the keys of one slot only, so each shard's keys share a hash tag:
shard ``i`` is ``{<tag i>}<prefix>:...``. The tags are chosen so their slots are evenly spaced
over the 16,384 slots (tag ``i`` falls in the ``i``-th of ``count`` equal slot ranges): however
the masters split the slot space, each gets its share of shards. A host goes to shard
``xxh64(host) mod count``, so hosts that look alike (``127.9.1.k``, ``www1.example.com``...)
spread evenly too; every URL of a host, its site lists, its DNS answer and its seen bits live in
that one shard, so a duplicate always meets its first copy in the same Bloom filter.

With one shard (a single Redis, the default) the keys are the ones of earlier versions: no tag.
Pure: no Redis calls here.
"""

from __future__ import annotations

from binascii import crc_hqx

import xxhash

SLOTS = 16384  # Redis Cluster hash slots


def key_slot(key: str) -> int:
    """The Redis Cluster slot of ``key`` (CRC16 of its hash tag, or of the whole key)."""
    raw = key.encode()
    start = raw.find(b"{")
    if start > -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return crc_hqx(raw, 0) % SLOTS


def spread_tags(count: int) -> list[str]:
    """``count`` hash tags whose slots fall one in each of ``count`` equal slot ranges."""
    tags = []
    for i in range(count):
        low, high = i * SLOTS // count, (i + 1) * SLOTS // count
        n = 0
        while not low <= key_slot(tag := f"{{s{i}.{n}}}") < high:
            n += 1
        tags.append(tag[1:-1])
    return tags


class HostShards:
    """The shard of a host and each shard's hash tag: what every store sharded by host shares
    (the frontier's ``Shards``, the revisit schedule)."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError(f"LARBIN_REDIS_SHARDS must be at least 1, got {count}")
        self.count = count
        self.tags = spread_tags(count) if count > 1 else [""]

    def of(self, host: str) -> int:
        """The shard of ``host``."""
        if self.count == 1:
            return 0
        return xxhash.xxh64_intdigest(host.encode()) % self.count

    def tagged(self, i: int, key: str) -> str:
        """``key`` in shard ``i``'s slot (unchanged with one shard)."""
        return f"{{{self.tags[i]}}}{key}" if self.count > 1 else key


class Shards(HostShards):
    """The shard of a host and the key names of each shard (module docstring)."""

    def __init__(self, count: int, frontier_key: str, seen_key: str, bits: int) -> None:
        super().__init__(count)
        self._frontier_key = frontier_key
        self._seen_key = seen_key
        self.bits = -(-bits // count)  # each shard's Bloom filter holds its share of the m bits
        self.shard_bits = 32 if self.bits > 2**32 else 0  # split past one Redis string

    def prefix(self, i: int) -> str:
        """Shard ``i``'s frontier prefix (``RedisFrontier``)."""
        return self.tagged(i, self._frontier_key)

    def seen_key(self, i: int) -> str:
        """Shard ``i``'s seen-bits string."""
        return self.tagged(i, self._seen_key)

    def positions(self, positions: list[int]) -> list[int]:
        """A URL's bit positions (over the whole filter) in its shard's filter."""
        if self.count == 1:
            return positions
        m = self.bits
        return [p % m for p in positions]

    def seed_prefix(self, start_key: str) -> str:
        """A prefix in the start-URLs list's slot (for the seeds a worker took)."""
        raw = start_key
        start = raw.find("{")
        if start > -1 and raw.find("}", start + 1) > start + 1:
            raw = raw[start + 1 : raw.find("}", start + 1)]
        return f"{{{raw}}}{self._frontier_key}"

    def ip_key(self, ip: str) -> str:
        """The per-IP lease key (``iplease.py``), in the shard the IP hashes to."""
        return f"{self.tagged(self.of(ip), self._frontier_key)}:iplease:{ip}"
