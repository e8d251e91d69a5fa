"""The seen-set's files in ``JOBDIR/dupefilter/``: the snapshot and the journal."""

from __future__ import annotations

import os
import struct
import zlib
from typing import TYPE_CHECKING, NamedTuple, Protocol

from larbinscrapy.seen.bitset import KEY_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

SNAPSHOT_MAGIC = b"LRBNDUPF"
SNAPSHOT_VERSION = 1
# magic, version, mode, reserved, m, k, bits set, crc32 of the bit array
SNAPSHOT_HEADER = struct.Struct(">8sHBBQIQI")
SNAPSHOT_NAME = "snapshot"
JOURNAL_NAME = "journal"


class SnapshotError(Exception):
    """The dupefilter snapshot in JOBDIR cannot be used."""


class CorruptSnapshotError(SnapshotError):
    """The snapshot file is damaged (magic, crc, length)."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(
            f"Dupefilter snapshot {path} is corrupt: {what}. Set"
            " LARBIN_DUPEFILTER_RESET_CORRUPT=True to move it aside and start with an empty"
            " dupefilter (pages seen before may be fetched again)."
        )
        self.path = path
        self.what = what


class SnapshotMismatchError(SnapshotError):
    """The snapshot was written with another mode, m or k than the settings give now."""


class BitArray(Protocol):
    """What a snapshot block is written from (``KHashBitSet``)."""

    m: int
    k: int
    count: int

    def buffer(self) -> memoryview: ...

    def crc32(self) -> int: ...


class Block(NamedTuple):
    """One bit array read back from a snapshot (its crc already checked)."""

    mode: int
    m: int
    k: int
    bits_set: int
    bits: memoryview


def write_snapshot(directory: Path, mode: int, arrays: Iterable[BitArray]) -> None:
    """Atomically replace ``directory/snapshot`` with one block per bit array."""
    final = directory / SNAPSHOT_NAME
    tmp = directory / (SNAPSHOT_NAME + ".tmp")
    with tmp.open("wb") as f:
        for bits in arrays:
            f.write(
                SNAPSHOT_HEADER.pack(
                    SNAPSHOT_MAGIC,
                    SNAPSHOT_VERSION,
                    mode,
                    0,
                    bits.m,
                    bits.k,
                    bits.count,
                    bits.crc32(),
                )
            )
            f.write(bits.buffer())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(directory)


def read_snapshot(path: Path, modes: Iterable[int]) -> list[Block]:
    """Every block of the snapshot at ``path``, or ``CorruptSnapshotError`` saying what is wrong."""
    data = memoryview(path.read_bytes())
    known = set(modes)
    blocks: list[Block] = []
    offset = 0
    while offset < len(data) or not blocks:
        rest = len(data) - offset
        if rest < SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(path, f"the file is {rest} bytes, shorter than its header")
        magic, version, mode, _, m, k, count, crc = SNAPSHOT_HEADER.unpack_from(data, offset)
        if magic != SNAPSHOT_MAGIC:
            raise CorruptSnapshotError(path, f"bad magic {magic!r} (expected {SNAPSHOT_MAGIC!r})")
        if version != SNAPSHOT_VERSION or mode not in known:
            raise CorruptSnapshotError(path, f"unknown version {version} or mode {mode}")
        offset += SNAPSHOT_HEADER.size
        nbytes = -(-m // 8)
        bits = data[offset : offset + nbytes]
        if len(bits) != nbytes:
            raise CorruptSnapshotError(
                path, f"{len(bits)} bytes of bits after the header, expected {nbytes}"
            )
        if zlib.crc32(bits) != crc:
            raise CorruptSnapshotError(path, "the crc32 of the bit array does not match its header")
        blocks.append(Block(mode, m, k, count, bits))
        offset += nbytes
    return blocks


def replay_journal(path: Path, test_and_set: Callable[[bytes], object]) -> tuple[int, int]:
    """Set every whole record of the journal at ``path``: (records replayed, torn tail bytes)."""
    if not path.exists():
        return 0, 0
    data = path.read_bytes()
    whole = len(data) - len(data) % KEY_BYTES
    for start in range(0, whole, KEY_BYTES):
        test_and_set(data[start : start + KEY_BYTES])
    return whole // KEY_BYTES, len(data) - whole


def fsync_dir(path: Path) -> None:
    """Make a rename durable (the directory entry is data too)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
