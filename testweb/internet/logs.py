"""Compact server-side logs of the simulated internet: one text line per request or query.

``web.log``: ``time ip port host path status`` (``-`` for a status never sent: a tarpit).
``dns.log``: ``time proto name type answer`` (answer: the first address, ``NXDOMAIN``,
``SERVFAIL``, ``NODATA``, ``DROP`` for a name that never answers, ``TC`` for a truncated UDP
answer). Lines are buffered and flushed every ``FLUSH_EVERY`` seconds by the event loop (one
write per batch, not per request) and on close, so a reader sees whole lines only.
"""

from __future__ import annotations

import asyncio
import time
from typing import IO, NamedTuple

FLUSH_EVERY = 0.25


class LineLog:
    """An append-only text log flushed in batches on the running loop (or per line without one)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self._lines: list[str] = []
        self._timer: asyncio.TimerHandle | None = None

    def write(self, *fields: object) -> None:
        if self._file is None:
            return
        self._lines.append(f"{time.time():.6f} " + " ".join(map(str, fields)) + "\n")
        if self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._timer = loop.call_later(FLUSH_EVERY, self.flush)

    def flush(self) -> None:
        self._timer = None
        if self._file is not None and self._lines:
            self._file.write("".join(self._lines))
            self._file.flush()
            self._lines.clear()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None


class WebEntry(NamedTuple):
    """One request at the web server."""

    t: float
    ip: str
    port: int
    host: str
    path: str
    status: int  # 0: never answered


class DnsEntry(NamedTuple):
    """One query at the DNS server."""

    t: float
    proto: str
    name: str
    qtype: str
    answer: str


def read_web(path: str) -> list[WebEntry]:
    """The web log's whole lines (a line still being written is left out)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if line.endswith("\n") and len(parts) == 6:
                out.append(
                    WebEntry(
                        float(parts[0]),
                        parts[1],
                        int(parts[2]),
                        parts[3],
                        parts[4],
                        0 if parts[5] == "-" else int(parts[5]),
                    )
                )
    return out


def read_dns(path: str) -> list[DnsEntry]:
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if line.endswith("\n") and len(parts) == 5:
                out.append(DnsEntry(float(parts[0]), *parts[1:]))
    return out
