"""The old path of ``PauseGate``, now ``larbinscrapy.middlewares.pause``.

Kept for settings that name it; resolved with a warning (``larbinscrapy.conf.moved``).
"""

from __future__ import annotations

from typing import Any

from larbinscrapy.conf.moved import moved

_MOVED = {"PauseGate": "larbinscrapy.middlewares.pause.PauseGate"}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
