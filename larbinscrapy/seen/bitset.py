"""A k-hash bit array: larbin's ``hashTable`` bitmap (k = 1) and a Bloom filter (k > 1)."""

from __future__ import annotations

import logging
import math
import struct
import zlib

import xxhash
from bitarray import bitarray

logger = logging.getLogger(__name__)

KEY_BYTES = 16  # what the journal stores per key: enough to recompute every position

_TWO_WORDS = struct.Struct(">QQ").unpack_from  # raises struct.error on keys < 16 bytes
_LN2_SQUARED = math.log(2) ** 2
_MIN_BITS = 8  # one byte: the smallest set the file format stores


def normalize_key(key: bytes) -> bytes:
    """The 16 bytes the positions come from (hashed first when the key is shorter)."""
    if len(key) < KEY_BYTES:
        return xxhash.xxh3_128_digest(key)
    return key[:KEY_BYTES]


def bloom_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """(m bits, k hashes) of the optimal Bloom filter for ``capacity`` keys at ``error_rate``."""
    if capacity < 1:
        raise ValueError(f"Bloom capacity must be >= 1, got {capacity!r}")
    if not 0.0 < error_rate < 1.0:
        raise ValueError(f"Bloom error rate must be between 0 and 1, got {error_rate!r}")
    m = math.ceil(-capacity * math.log(error_rate) / _LN2_SQUARED)
    k = max(1, round(m / capacity * math.log(2)))
    return m, k


def bitmap_bits_for(n: int, error_rate: float) -> int:
    """Bits a one-hash bitmap needs so that ``n`` keys give ``error_rate`` (1 - e^(-n/m) = p)."""
    return math.ceil(max(n, 1) / -math.log1p(-error_rate))


def theoretical_fp_rate(n: int, m: int, k: int) -> float:
    """Expected false-positive rate after ``n`` distinct keys: (1 - e^(-kn/m))^k."""
    return (1.0 - math.exp(-k * n / m)) ** k


class KHashBitSet:
    """m bits, k bit positions per key; ``test_and_set`` is larbin's ``testSet``.

    ``count`` (bits set) is kept as bits flip, so the fill ratio is O(1). When ``added`` is a
    list, every key that set at least one new bit is appended to it (normalised to 16 bytes):
    the caller drains it into its journal.
    """

    def __init__(self, m: int, k: int = 1) -> None:
        if m < _MIN_BITS:
            raise ValueError(f"a bit set needs at least {_MIN_BITS} bits, got m={m!r}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k!r}")
        self.m = m
        self.k = k
        self.bits = bitarray(m, endian="little")
        self.bits.setall(0)
        self.count = 0
        self.added: list[bytes] | None = None
        self._rest = range(1, k)

    @classmethod
    def create(cls, m: int, k: int = 1) -> KHashBitSet:
        """The fastest implementation for this k (one hash has its own code path)."""
        return OneHashBitSet(m) if k == 1 else cls(m, k)

    def positions(self, key: bytes) -> list[int]:
        """The k bit positions of ``key``."""
        try:
            h1, h2 = _TWO_WORDS(key)
        except struct.error:
            h1, h2 = _TWO_WORDS(normalize_key(key))
        m = self.m
        h1 %= m
        h2 = (h2 | 1) % m
        # Reduced mod m first, so the sum stays a small int: same positions as (h1 + i*h2) % m.
        out = [h1]
        for _ in self._rest:
            h1 += h2
            if h1 >= m:
                h1 -= m
            out.append(h1)
        return out

    def test_and_set(self, key: bytes) -> bool:
        """True if every bit of ``key`` was already set; otherwise set them and return False."""
        try:  # positions() inlined: this is the per-link hot path in bloom mode
            h1, h2 = _TWO_WORDS(key)
        except struct.error:
            key = normalize_key(key)
            h1, h2 = _TWO_WORDS(key)
        m = self.m
        h1 %= m
        h2 = (h2 | 1) % m
        idx = [h1]
        for _ in self._rest:
            h1 += h2
            if h1 >= m:
                h1 -= m
            idx.append(h1)
        bits = self.bits
        if bits[idx].all():  # one C-level gather instead of k Python index operations
            return True
        new = 0
        for p in idx:
            if not bits[p]:
                bits[p] = 1
                new += 1
        self.count += new
        added = self.added
        if added is not None:
            added.append(key[:KEY_BYTES])
        return False

    def __contains__(self, key: bytes) -> bool:
        """Test without setting; stops at the first clear bit.

        The scalable chain asks each older filter this for every new key: a key that is not
        there usually fails on its first or second bit (a full filter is half set), so
        computing positions one at a time beats computing all k for one gather.
        """
        try:
            h1, h2 = _TWO_WORDS(key)
        except struct.error:
            h1, h2 = _TWO_WORDS(normalize_key(key))
        m = self.m
        h1 %= m
        h2 = (h2 | 1) % m
        bits = self.bits
        if not bits[h1]:
            return False
        for _ in self._rest:
            h1 += h2
            if h1 >= m:
                h1 -= m
            if not bits[h1]:
                return False
        return True

    @property
    def nbytes(self) -> int:
        return self.bits.nbytes

    @property
    def fill_ratio(self) -> float:
        return self.count / self.m

    @property
    def estimated_fp_rate(self) -> float:
        """Chance that a new key finds all its k bits set: fill_ratio ** k."""
        return self.fill_ratio**self.k

    @property
    def estimated_items(self) -> int:
        """Distinct keys inserted, estimated from the fill: n = -(m/k) ln(1 - X/m)."""
        if self.count >= self.m:
            return self.m
        return round(-self.m / self.k * math.log1p(-self.count / self.m))

    def buffer(self) -> memoryview:
        """The bit array as bytes (no copy), in the on-disk layout."""
        return memoryview(self.bits)

    def crc32(self) -> int:
        return zlib.crc32(self.buffer())

    def load(self, data: bytes | memoryview, count: int | None = None) -> None:
        """Replace the bits with ``data`` (``nbytes`` bytes); ``count`` is checked if given."""
        if len(data) != self.nbytes:
            raise ValueError(f"expected {self.nbytes} bytes of bits, got {len(data)}")
        bits = bitarray(endian="little")
        bits.frombytes(data)  # type: ignore[arg-type]  # takes any buffer; the stub says bytes
        padding = bits[self.m :]
        if padding.any():
            raise ValueError("bits are set past the end of the bit array")
        del bits[self.m :]
        real = bits.count()
        if count is not None and count != real:
            raise ValueError(f"header says {count} bits are set, the array has {real}")
        self.bits = bits
        self.count = real

    def clear(self) -> None:
        self.bits.setall(0)
        self.count = 0


class OneHashBitSet(KHashBitSet):
    """k = 1: larbin's bitmap. One position, ``h1 mod m``, tested and set inline."""

    def __init__(self, m: int, k: int = 1) -> None:
        if k != 1:
            raise ValueError(f"OneHashBitSet has k=1, got {k!r}")
        super().__init__(m, 1)

    def positions(self, key: bytes) -> list[int]:
        try:
            h1 = _TWO_WORDS(key)[0]
        except struct.error:
            h1 = _TWO_WORDS(normalize_key(key))[0]
        return [h1 % self.m]

    def test_and_set(self, key: bytes) -> bool:
        try:
            pos = _TWO_WORDS(key)[0] % self.m
        except struct.error:
            key = normalize_key(key)
            pos = _TWO_WORDS(key)[0] % self.m
        bits = self.bits
        if bits[pos]:
            return True
        bits[pos] = 1
        self.count += 1
        added = self.added
        if added is not None:
            added.append(key[:KEY_BYTES])  # a 16-byte key is not copied
        return False

    def __contains__(self, key: bytes) -> bool:
        return bool(self.bits[self.positions(key)[0]])
