"""The URLs a crawl dropped because their host's name did not resolve, kept for a retry.

``LarbinScheduler`` appends them to ``JOBDIR/dns_failed`` (one URL a line, one write per
dropped site, append-only: a torn last line is ignored), and ``-a retry=dns`` (the larbin
spider) asks for them again: ``take`` moves them to ``JOBDIR/dns_failed.retry`` (written to a
temporary file and renamed) before the scheduler opens, the spider re-queues them past the
seen-set, and ``retried`` removes that file once all of them were handed to the frontier. A
kill before that leaves the file, and the next ``-a retry=dns`` asks for them again.
Kept: the URLs in the dropped site's memory queue and those that came after the failure; the
ones already moved to the wait FIFO on disk are not (reading them back costs a disk read each).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

FILE = "dns_failed"
TAKEN = "dns_failed.retry"


class DnsFailedLog:
    """Appends the URLs dropped for DNS to ``JOBDIR/dns_failed``; opened at the first one."""

    def __init__(self, jobdir: str | Path) -> None:
        self.path = Path(jobdir, FILE)
        self._fd: int | None = None
        self._broken = False

    def add(self, urls: list[str]) -> None:
        if not urls or self._broken:
            return
        data = "".join(url + "\n" for url in urls).encode("utf-8", "surrogateescape")
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._fd, data)
        except OSError as exc:  # the crawl goes on; only the retry list is incomplete
            self._broken = True
            logger.warning(
                "larbin: cannot keep the URLs dropped for DNS in %s: %s (-a retry=dns "
                "will not see them)",
                self.path,
                exc.strerror or exc,
            )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read(path: Path) -> list[str]:
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except FileNotFoundError:
        return []
    lines = text.split("\n")
    return [line for line in lines[:-1] if line]  # the last one is torn (or empty)


def take(jobdir: str | Path) -> list[str]:
    """The URLs to retry (an unfinished retry's first), moved to ``TAKEN``; ``OSError``."""
    taken, fresh = Path(jobdir, TAKEN), Path(jobdir, FILE)
    urls = list(dict.fromkeys(_read(taken) + _read(fresh)))
    if not fresh.exists():
        return urls
    tmp = taken.with_name(TAKEN + ".tmp")
    with tmp.open("wb") as f:
        f.write("".join(u + "\n" for u in urls).encode("utf-8", "surrogateescape"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, taken)
    fresh.unlink()
    return urls


def retried(jobdir: str | Path) -> None:
    """Every URL taken was handed to the frontier: forget them."""
    Path(jobdir, TAKEN).unlink(missing_ok=True)
