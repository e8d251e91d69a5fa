"""glibc's heap in use (``mallinfo2``): what C code (c-ares, OpenSSL) holds, not Python."""

from __future__ import annotations

import ctypes

_FIELDS = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (*_FIELDS, "fordblks", "keepcost")]


def c_heap_in_use() -> int:
    """Bytes of glibc's heap in use now (allocated and not freed)."""
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = _MallInfo2
    return int(libc.mallinfo2().uordblks)
