"""Throttling pauses kept in ``JOBDIR``, so a paused host stays paused after a resume."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from twisted.internet import threads

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

Pauses = dict[str, tuple[float, str]]  # host -> (Unix time the pause ends, IP)


def write_pauses(path: Path, pauses: Pauses) -> None:
    """Replace ``path`` with ``pauses``: written aside, then renamed over (atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(pauses), encoding="utf-8")
    os.replace(tmp, path)


class PauseFile:
    """The pauses of one job (module docstring); ``path`` None keeps them in memory only."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.pauses: Pauses = {}
        self._writing: Deferred[None] | None = None
        self._dirty = False

    @classmethod
    def in_jobdir(cls, jobdir: str | None) -> PauseFile:
        return cls(Path(jobdir, "politeness", "pauses.json") if jobdir else None)

    def load(self, now: float) -> Pauses:
        """The pauses still running at Unix time ``now``; an unreadable file counts as none."""
        if self.path is None or not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            pauses = {str(h): (float(v[0]), str(v[1])) for h, v in raw.items()}
        except (OSError, ValueError, TypeError, IndexError, AttributeError) as exc:
            logger.warning("Ignoring unreadable %s: %s", self.path, exc)
            return {}
        self.pauses = {h: v for h, v in pauses.items() if v[0] > now}
        return dict(self.pauses)

    def record(self, host: str, ip: str, until: float) -> None:
        """``host`` (on ``ip``) is paused until Unix time ``until``: save it."""
        now = time.time()
        self.pauses = {h: v for h, v in self.pauses.items() if v[0] > now}
        self.pauses[host] = (max(until, self.pauses.get(host, (0.0, ""))[0]), ip)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        if self._writing is not None:
            self._dirty = True
            return
        self._dirty = False
        self._writing = threads.deferToThread(write_pauses, self.path, dict(self.pauses))
        self._writing.addErrback(
            lambda f: logger.error("Cannot write %s: %s", self.path, f.getErrorMessage())
        )
        self._writing.addBoth(self._written)

    def _written(self, _: object) -> None:
        self._writing = None
        if self._dirty:
            self._save()
