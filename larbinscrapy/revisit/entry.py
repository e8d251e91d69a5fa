"""One page's revisit state, packed: what the store keeps per page (pure)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

SIMHASH = 1  # flags: the digest is a simhash (compare by Hamming distance)
GONE = 2  # flags: the last fetch answered 404 or 410 (the page's own back-off applies)
ERROR = 4  # flags: the last fetches answered 5xx; ``streak`` counts them (observe.py)
MAX_ETAG = 48
MAX_URL = 0xFFFF
_HEAD = struct.Struct("<16sdfbBBBI8sIBH")
_LEN = struct.Struct("<H")
_CRC = struct.Struct("<I")


@dataclass(slots=True)
class Entry:
    """A page's schedule: when it is due and what the rule and conditional GET need."""

    fp: bytes
    url: str
    due: float
    interval: float
    streak: int = 0
    fetch_count: int = 1
    digest: bytes = b"\0" * 8
    flags: int = 0
    last_modified: int = 0
    etag: bytes = b""
    depth: int = 0
    site_depth: int = 0

    def pack(self) -> bytes:
        url = self.url.encode("utf-8")[:MAX_URL]
        etag = self.etag if len(self.etag) <= MAX_ETAG else b""
        return (
            _HEAD.pack(
                self.fp,
                self.due,
                self.interval,
                max(-128, min(127, self.streak)),
                self.flags,
                min(255, self.depth),
                min(255, self.site_depth),
                min(0xFFFFFFFF, self.fetch_count),
                self.digest,
                self.last_modified,
                len(etag),
                len(url),
            )
            + etag
            + url
        )

    @classmethod
    def unpack(cls, data: bytes | memoryview) -> Entry:
        (
            fp,
            due,
            interval,
            streak,
            flags,
            depth,
            site_depth,
            count,
            digest,
            lastmod,
            etag_len,
            url_len,
        ) = _HEAD.unpack_from(data)
        start = _HEAD.size
        etag = bytes(data[start : start + etag_len])
        url = bytes(data[start + etag_len : start + etag_len + url_len]).decode("utf-8", "replace")
        return cls(
            fp, url, due, interval, streak, count, digest, flags, lastmod, etag, depth, site_depth
        )

    def evolve(self, **changes: Any) -> Entry:
        return replace(self, **changes)

    def state_size(self) -> int:
        """Bytes of the packed state without the URL (the issue's 100-byte budget)."""
        return _HEAD.size + (len(self.etag) if len(self.etag) <= MAX_ETAG else 0)


def frame(payload: bytes) -> bytes:
    """``u16 length | payload | u32 CRC32 of both``."""
    head = _LEN.pack(len(payload))
    return head + payload + _CRC.pack(zlib.crc32(payload, zlib.crc32(head)))


def frames(data: bytes | memoryview, limit: int = -1) -> Iterator[tuple[int, memoryview]]:
    """``(end offset, payload)`` of each whole, intact frame, stopping at the first bad one."""
    view = memoryview(data)
    pos, n = 0, 0
    while pos + _LEN.size <= len(view) and n != limit:
        (length,) = _LEN.unpack_from(view, pos)
        end = pos + _LEN.size + length + _CRC.size
        if end > len(view):
            return
        (crc,) = _CRC.unpack_from(view, end - _CRC.size)
        if zlib.crc32(view[pos : end - _CRC.size]) != crc:
            return
        yield end, view[pos + _LEN.size : end - _CRC.size]
        pos, n = end, n + 1
