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
_CHUNK = 1 << 20  # bytes read at a time


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


def write_snapshot(directory: Path, mode: int, arrays: Iterable[BitArray]) -> None:
    """Write ``directory/snapshot``, one block per bit array: in place over the previous one
    when it has the same blocks (the usual case: no second copy on disk), else a new file
    atomically replaced. A block the file lacks (the chain grew) is never written in place:
    its bits would go past the file's end ahead of its header, and a kill between the two
    leaves a header of zeros that no reader can tell from damage.

    In place is safe because bits are only ever set and the caller empties the journal only
    after this returns: the first header is marked ``DIRTY`` (fsynced) before any bit is
    written, so a crash part-way leaves a file whose every byte is the old snapshot's or the
    new one's (a superset of the old bits either way), read without its crc32, and the journal
    still holds every key since the old snapshot. The headers, crc32 included, are written
    last, then the mark is cleared.
    """
    final = directory / SNAPSHOT_NAME
    arrays = list(arrays)
    layout = [(bits.m, bits.k) for bits in arrays]
    if final.exists() and _layout(final) == layout:
        _write_in_place(final, mode, arrays)
        return
    tmp = directory / (SNAPSHOT_NAME + ".tmp")
    with tmp.open("wb") as f:
        for bits in arrays:
            f.write(_header(mode, bits))
            f.write(bits.buffer())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(directory)


DIRTY = 1  # the reserved byte of a snapshot's first header: written in place, not finished


def _header(mode: int, bits: BitArray, flags: int = 0, crc: int | None = None) -> bytes:
    return SNAPSHOT_HEADER.pack(
        SNAPSHOT_MAGIC,
        SNAPSHOT_VERSION,
        mode,
        flags,
        bits.m,
        bits.k,
        bits.count,
        bits.crc32() if crc is None else crc,
    )


def _layout(path: Path) -> list[tuple[int, int]]:
    """The (m, k) of each block of the snapshot at ``path`` (one that matches no layout if it
    cannot be read)."""
    try:
        return [(h.m, h.k) for h in read_headers(path, range(256))]
    except (SnapshotError, OSError):
        return [(-1, -1)]  # matches no layout: written anew


def _write_in_place(path: Path, mode: int, arrays: list[BitArray]) -> None:
    with path.open("r+b") as f:
        f.seek(0)
        first = arrays[0]
        f.write(_header(mode, first, DIRTY, crc=0))  # the mark, before any bit moves
        f.flush()
        os.fsync(f.fileno())
        offset = 0
        for bits in arrays:
            f.seek(offset + SNAPSHOT_HEADER.size)
            f.write(bits.buffer())
            offset += SNAPSHOT_HEADER.size + len(bits.buffer())
        f.truncate(offset)
        f.flush()
        os.fsync(f.fileno())
        offset = 0
        for index, bits in enumerate(arrays):  # the first header last: it clears the mark
            if index:
                f.seek(offset)
                f.write(_header(mode, bits))
            offset += SNAPSHOT_HEADER.size + len(bits.buffer())
        f.flush()
        os.fsync(f.fileno())
        f.seek(0)
        f.write(_header(mode, first))
        f.flush()
        os.fsync(f.fileno())


class BlockHeader(NamedTuple):
    """One bit array's header in a snapshot, and where its bits start (not read yet)."""

    mode: int
    m: int
    k: int
    bits_set: int
    crc: int
    offset: int
    dirty: bool = False  # written in place and not finished: no crc32, count recomputed

    @property
    def nbytes(self) -> int:
        return -(-self.m // 8)


def read_headers(path: Path, modes: Iterable[int]) -> list[BlockHeader]:
    """The headers of every block of the snapshot at ``path``, reading only them (the bits are
    read by ``read_bits`` into the arrays that hold them); ``CorruptSnapshotError`` if the
    file's structure is wrong."""
    known = set(modes)
    blocks: list[BlockHeader] = []
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        offset = 0
        while offset < size or not blocks:
            rest = size - offset
            if rest < SNAPSHOT_HEADER.size:
                raise CorruptSnapshotError(
                    path, f"the file is {rest} bytes, shorter than its header"
                )
            f.seek(offset)
            magic, version, mode, flags, m, k, count, crc = SNAPSHOT_HEADER.unpack(
                f.read(SNAPSHOT_HEADER.size)
            )
            if magic != SNAPSHOT_MAGIC:
                raise CorruptSnapshotError(
                    path, f"bad magic {magic!r} (expected {SNAPSHOT_MAGIC!r})"
                )
            if version != SNAPSHOT_VERSION or mode not in known:
                raise CorruptSnapshotError(path, f"unknown version {version} or mode {mode}")
            offset += SNAPSHOT_HEADER.size
            dirty = blocks[0].dirty if blocks else flags == DIRTY
            block = BlockHeader(mode, m, k, count, crc, offset, dirty)
            if size - offset < block.nbytes:
                raise CorruptSnapshotError(
                    path, f"{size - offset} bytes of bits after the header, expected {block.nbytes}"
                )
            blocks.append(block)
            offset += block.nbytes
    return blocks


def read_bits(path: Path, block: BlockHeader, into: memoryview) -> None:
    """Read ``block``'s bits straight into ``into`` (its array's own buffer: no copy of the
    file in memory) and check their crc32."""
    if len(into) != block.nbytes:
        raise CorruptSnapshotError(
            path, f"expected {len(into)} bytes of bits, the header gives {block.nbytes}"
        )
    crc, done = 0, 0
    with path.open("rb", buffering=0) as f:
        f.seek(block.offset)
        while done < len(into):
            n = f.readinto(into[done : done + _CHUNK])
            if not n:
                raise CorruptSnapshotError(
                    path, f"{done} bytes of bits after the header, expected {block.nbytes}"
                )
            crc = zlib.crc32(into[done : done + n], crc)
            done += n
    if crc != block.crc and not block.dirty:
        raise CorruptSnapshotError(path, "the crc32 of the bit array does not match its header")


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
