"""The sites whose sitemaps a crawl started to read, in ``JOBDIR/sitemaps/pending``.

A site's sitemaps are started by its robots.txt or one of its pages. A stop (Ctrl-C, a scrapyd
cancel) or a ``kill -9`` while they wait for their IP's turn leaves the site unread; if its
pages were all done, nothing in the resumed crawl starts it again and the URLs only its
sitemaps list are never found. So each start is appended here (unbuffered: in the OS before the
page that started it is acknowledged), and a resumed crawl reads again every listed site the
seen-set does not know as read. The seen-set's "read" bit reaches the disk only after the
records of the URLs the read queued (the dupefilter flushes the frontier's records first), so a
site it knows was read lost nothing. The file is rewritten at each open with the unread sites
alone; in a run it grows one line a site started.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _line(site: str, listed: list[str]) -> bytes:
    return (json.dumps([site, listed], separators=(",", ":")) + "\n").encode()


class PendingSites:
    """Started sites, appended to ``path`` (``None``: no job directory, nothing kept)."""

    def __init__(
        self, path: Path | None, on_error: Callable[[OSError], None] | None = None
    ) -> None:
        self.path = path
        self.on_error = on_error  # a write failed (a full disk): the crawl stops (fatal.py)
        self._fd = -1

    def failed(self, exc: OSError) -> None:
        """Nothing more is written (a resume reads what reached the file); ``on_error``, or
        raise without one."""
        self.close()
        if self.on_error is None:
            raise exc
        self.on_error(exc)

    def open(self, read: Callable[[str], bool]) -> dict[str, list[str]]:
        """The sites started before and not ``read``; the file then holds them alone."""
        if self.path is None:
            return {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        pending: dict[str, list[str]] = {}
        for raw in data.splitlines():
            try:
                site, listed = json.loads(raw)
            except ValueError:  # a torn last line (a kill in the write)
                continue
            if isinstance(site, str) and isinstance(listed, list) and not read(site):
                pending[site] = [str(url) for url in listed]
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(b"".join(_line(site, listed) for site, listed in pending.items()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        return pending

    def add(self, site: str, listed: list[str]) -> None:
        """``site`` started to be read (its robots.txt's ``listed`` sitemaps)."""
        if self._fd < 0:
            return
        view = memoryview(_line(site, listed))
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self.failed(exc)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
