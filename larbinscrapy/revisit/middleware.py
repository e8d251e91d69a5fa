"""The old path of ``ConditionalGetMiddleware``, now ``larbinscrapy.middlewares.conditional``.

Kept for settings that name it; resolved with a warning (``larbinscrapy.conf.moved``).
"""

from __future__ import annotations

from typing import Any

from larbinscrapy.conf.moved import moved

_MOVED = {
    "ConditionalGetMiddleware": "larbinscrapy.middlewares.conditional.ConditionalGetMiddleware",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
