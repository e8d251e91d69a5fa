"""A table of 64-bit keys to 64-bit values in two flat arrays, for state kept per page or per
site for a whole crawl: a dict of Python ints costs ~70-135 bytes an entry, a slot here 16 at a
load of 1/3 to 2/3 (open addressing, linear probing)."""

from __future__ import annotations

from array import array
from typing import Final

_EMPTY: Final = 0
_GONE: Final = 1  # a removed entry: probing goes on past it


class U64Table:
    """``key -> value``, both in ``0 .. 2**64 - 1``. Keys 0 and 1 mark free and removed slots,
    so they are stored as 2 and 3: a caller's keys are hashes, and one that must tell such
    keys apart (or two hashes of 8 equal bytes) checks what it stored elsewhere."""

    def __init__(self, capacity: int = 1024) -> None:
        self._keys = array("Q", bytes(8 * capacity))  # capacity: a power of two
        self._values = array("Q", bytes(8 * capacity))
        self._mask = capacity - 1
        self._live = 0
        self._filled = 0  # live and removed slots: what probing walks

    def __len__(self) -> int:
        return self._live

    def get(self, key: int) -> int | None:
        key = key if key > _GONE else key + 2
        keys, mask = self._keys, self._mask
        i = key & mask
        while (slot := keys[i]) != key:
            if slot == _EMPTY:
                return None
            i = (i + 1) & mask
        return self._values[i]

    def set(self, key: int, value: int) -> None:
        if 3 * (self._filled + 1) > 2 * len(self._keys):
            self._rebuild()
        key = key if key > _GONE else key + 2
        keys, mask = self._keys, self._mask
        i, free = key & mask, -1
        while (slot := keys[i]) != key:
            if slot == _EMPTY:
                if free < 0:
                    free = i
                    self._filled += 1
                keys[free] = key
                self._live += 1
                i = free
                break
            if slot == _GONE and free < 0:
                free = i
            i = (i + 1) & mask
        self._values[i] = value

    def pop(self, key: int) -> None:
        key = key if key > _GONE else key + 2
        keys, mask = self._keys, self._mask
        i = key & mask
        while (slot := keys[i]) != key:
            if slot == _EMPTY:
                return
            i = (i + 1) & mask
        keys[i] = _GONE
        self._live -= 1

    def _rebuild(self) -> None:
        """Twice the slots when live entries fill a third; else the same, without the removed."""
        capacity = len(self._keys)
        if 3 * self._live >= capacity:
            capacity *= 2
        keys, values = self._keys, self._values
        self._keys = array("Q", bytes(8 * capacity))
        self._values = array("Q", bytes(8 * capacity))
        self._mask, self._filled = capacity - 1, self._live
        new_keys, new_values, mask = self._keys, self._values, self._mask
        for key, value in zip(keys, values, strict=True):
            if key > _GONE:
                i = key & mask
                while new_keys[i] != _EMPTY:
                    i = (i + 1) & mask
                new_keys[i], new_values[i] = key, value
