"""A seen-set that grows with the crawl: a chain of Bloom filters, each larger and tighter."""

from __future__ import annotations

import math

from larbinscrapy.seen.bitset import KHashBitSet, bloom_size

MIN_GROWTH = 2  # each new filter holds at least twice the last
FULL_MARGIN = 0.8  # a filter is full at this share of its error budget (module docstring)


def chain_plan(
    capacity: int, error_rate: float, growth: int, tightening: float, index: int
) -> tuple[int, int, float]:
    """(m bits, k hashes, error budget p_i) of filter ``index`` of the chain."""
    p = error_rate * (1.0 - tightening) * tightening**index
    m, k = bloom_size(capacity * growth**index, p)
    return m, k, p


class BloomChain:
    """Scalable Bloom filter: ``test_and_set`` is larbin's ``testSet`` over the whole chain.

    It offers what the dupefilter reads of a ``KHashBitSet`` (``m``, ``k``, ``count``,
    ``nbytes``, ``fill_ratio``, ``estimated_fp_rate``, ``estimated_items``, ``added``,
    ``clear``, ``in``), summed over the filters; ``filters`` are the bit arrays, oldest first.
    """

    def __init__(self, capacity: int, error_rate: float, growth: int, tightening: float) -> None:
        if capacity < 1:
            raise ValueError(f"LARBIN_DUPEFILTER_CAPACITY must be >= 1, got {capacity!r}")
        if not 0.0 < error_rate < 1.0:
            raise ValueError(f"LARBIN_DUPEFILTER_ERROR_RATE must be in (0, 1), got {error_rate!r}")
        if not isinstance(growth, int) or growth < MIN_GROWTH:
            raise ValueError(
                f"LARBIN_DUPEFILTER_GROWTH must be an integer >= {MIN_GROWTH}, got {growth!r}"
            )
        if not 0.0 < tightening < 1.0:
            raise ValueError(f"LARBIN_DUPEFILTER_TIGHTENING must be in (0, 1), got {tightening!r}")
        self.capacity = capacity
        self.error_rate = error_rate
        self.growth = growth
        self.tightening = tightening
        self.filters: list[KHashBitSet] = []
        self._added: list[bytes] | None = None
        self._append()

    def plan(self, index: int) -> tuple[int, int, float]:
        """(m, k, p_i) of filter ``index``: what a snapshot's filter ``index`` must match."""
        return chain_plan(self.capacity, self.error_rate, self.growth, self.tightening, index)

    def _append(self) -> None:
        m, k, p = self.plan(len(self.filters))
        last = KHashBitSet(m, k)
        last.added = self._added
        self.filters.append(last)
        self._older = tuple(self.filters[:-1])
        self._last = last
        self._last_test_and_set = last.test_and_set
        # fill**k >= FULL_MARGIN * p  <=>  count >= m * (FULL_MARGIN * p)**(1/k)
        self._full_at = math.ceil(m * (FULL_MARGIN * p) ** (1.0 / k))

    def test_and_set(self, key: bytes) -> bool:
        """True if ``key`` is in some filter; otherwise set it in the newest and return False."""
        for older in self._older:
            if key in older:
                return True
        if self._last_test_and_set(key):
            return True
        if self._last.count >= self._full_at:
            self._append()
        return False

    def __contains__(self, key: bytes) -> bool:
        return any(key in bits for bits in self.filters)

    def grow_to(self, n: int) -> None:
        """Have ``n`` filters (a snapshot is being loaded into them)."""
        while len(self.filters) < n:
            self._append()

    def settle(self) -> None:
        """Append a filter if the newest is full (after bits were loaded into it)."""
        if self._last.count >= self._full_at:
            self._append()

    @property
    def added(self) -> list[bytes] | None:
        return self._added

    @added.setter
    def added(self, value: list[bytes] | None) -> None:
        """The journal buffer: only the newest filter sets keys, but all share one list."""
        self._added = value
        for bits in self.filters:
            bits.added = value

    @property
    def m(self) -> int:
        return sum(bits.m for bits in self.filters)

    @property
    def k(self) -> int:
        return self._last.k

    @property
    def count(self) -> int:
        return sum(bits.count for bits in self.filters)

    @property
    def nbytes(self) -> int:
        return sum(bits.nbytes for bits in self.filters)

    @property
    def fill_ratio(self) -> float:
        return self.count / self.m

    @property
    def estimated_fp_rate(self) -> float:
        """Chance that a new key is found in some filter: 1 - prod(1 - fill_i**k_i)."""
        miss = 1.0
        for bits in self.filters:
            miss *= 1.0 - bits.estimated_fp_rate
        return 1.0 - miss

    @property
    def estimated_items(self) -> int:
        return sum(bits.estimated_items for bits in self.filters)

    def clear(self) -> None:
        """Back to one empty filter."""
        self.filters = []
        self._append()
