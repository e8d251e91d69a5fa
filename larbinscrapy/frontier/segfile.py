"""The on-disk format of a ``SegmentFifo`` (``segments.py``): framing, scanning, the state file."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import zlib
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from collections.abc import Iterator

logger = logging.getLogger(__name__)

MAGIC = b"LSG1"
SEG_HEADER = struct.Struct("<4sIQ")  # magic, segment_records, segment number
REC_HEADER = struct.Struct("<II")  # payload length, crc32(payload, length)
ACK = struct.Struct("<QQ")  # rid, rid ^ ACK_MASK
ACK_MASK = 0xA5A5_A5A5_A5A5_A5A5
HDR = REC_HEADER.size
MAX_RECORD = 1 << 26  # a length above this is garbage, not a record (requests are ~100 B)
READ_CHUNK = 256 * 1024
_unpack_header = REC_HEADER.unpack_from
_crc32 = zlib.crc32


class Segment:
    """One segment file: how many valid records it holds and which of them are acked."""

    __slots__ = ("acked", "acked_count", "count", "nbytes", "no", "sealed")

    def __init__(self, no: int, count: int = 0, sealed: bool = False, nbytes: int = 0) -> None:
        self.no = no
        self.count = count  # valid records (pushed so far, or up to a torn/corrupt one)
        self.sealed = sealed  # no record will ever be appended again
        self.nbytes = nbytes  # bytes covering `count` records (header included)
        self.acked: bytearray | None = None  # bit i set: record i acked
        self.acked_count = 0

    def is_acked(self, idx: int) -> bool:
        bitmap = self.acked
        return bitmap is not None and bool(bitmap[idx >> 3] & (1 << (idx & 7)))


def popcount(bitmap: bytearray, lo: int, hi: int) -> int:
    """Set bits in [lo, hi) of a little-endian bitmap (rare paths only)."""
    if hi <= lo:
        return 0
    return ((int.from_bytes(bitmap, "little") >> lo) & ((1 << (hi - lo)) - 1)).bit_count()


def scan_records(f: BinaryIO, offset: int) -> tuple[int, int, str | None]:
    """Walk the records from ``offset``: (good records, offset after them, error or None)."""
    count, buf, pos = 0, b"", 0
    while True:
        avail = len(buf) - pos
        need = HDR
        if avail >= HDR:
            n, crc = _unpack_header(buf, pos)
            if n > MAX_RECORD:
                return count, offset, f"impossible record length {n}"
            need = HDR + n
            if avail >= need:
                if _crc32(memoryview(buf)[pos + HDR : pos + need], n) != crc:
                    return count, offset, "CRC mismatch"
                count += 1
                offset += need
                pos += need
                continue
        chunk = f.read(max(4 * READ_CHUNK, need - avail))
        if not chunk:
            break
        buf, pos = buf[pos:] + chunk, 0
    if avail:
        return count, offset, "truncated record" if avail >= HDR else "truncated record header"
    return count, offset, None


def frames(buf: bytes, pos: int, count: int) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of the first ``count`` records of a buffer, from ``pos``.

    For records a scan already found good: a bad one ends the walk quietly.
    """
    for _ in range(count):
        if pos + HDR > len(buf):
            return
        n, crc = _unpack_header(buf, pos)
        payload = buf[pos + HDR : pos + HDR + n]
        if len(payload) != n or _crc32(payload, n) != crc:
            return
        yield pos, payload
        pos += HDR + n


def read_frame(path: str, offset: int) -> bytes | None:
    """The record at ``offset`` of a segment file, or None if it is torn or corrupt."""
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, 4096, offset)
        if len(head) < HDR:
            return None
        n, crc = _unpack_header(head, 0)
        if n > MAX_RECORD:
            return None
        payload = head[HDR : HDR + n]
        if len(payload) < n:
            payload += os.pread(fd, n - len(payload), offset + len(head))
    finally:
        os.close(fd)
    return payload if len(payload) == n and _crc32(payload, n) == crc else None


def truncate_segment(seg: Segment, count: int, nbytes: int) -> None:
    """Cut a segment to its first ``count`` records; acked bits past the cut go."""
    seg.count = count
    seg.nbytes = nbytes
    if seg.acked is not None:
        for i in range(count, len(seg.acked) * 8):
            seg.acked[i >> 3] &= ~(1 << (i & 7)) & 0xFF
        seg.acked_count = popcount(seg.acked, 0, count)


def read_state(path: str) -> dict[str, Any] | None:
    """The checkpoint, or None if there is none or it is unreadable (then every segment is
    rescanned)."""
    try:
        with open(path, "rb") as f:
            state = json.loads(f.read())
    except FileNotFoundError:
        return None
    except ValueError as exc:  # replaced atomically, so this is damage, not a crash
        logger.warning("%s is unreadable (%s): rescanning every segment", path, exc)
        return None
    if state.get("format") != 1:
        raise ValueError(f"{path}: unknown state format {state.get('format')!r}")
    return state


def write_state(path: str, state: dict[str, Any]) -> None:
    """Replace the checkpoint atomically: tmp, fsync, ``os.replace``, fsync the directory."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(json.dumps(state, separators=(",", ":")).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
