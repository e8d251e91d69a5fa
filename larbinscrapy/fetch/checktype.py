"""larbin's ``checkType``, its pure part: which media types are worth downloading.

The middlewares that apply it (``ContentTypeMiddleware``, ``BoundedDecompressionMiddleware``)
live in ``larbinscrapy/middlewares/checktype.py``; their old paths here still resolve, with a
warning (``larbinscrapy.conf.moved``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from larbinscrapy.conf.moved import moved

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "BOMB",
    "CONTENT_TYPE",
    "HTML_TYPES",
    "AsksContentTypes",
    "media_type",
    "parse_content_types",
]

CONTENT_TYPE = "content_type"  # the drop reason: larbin/dropped/content_type
BOMB = "decompression_bomb"  # larbin/dropped/decompression_bomb
HTML_TYPES = ("text/html", "application/xhtml+xml", "")


def parse_content_types(value: str | Iterable[str]) -> tuple[str, ...]:
    """``"application/pdf, image/*"`` -> ``("application/pdf", "image/")``, lower-case."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    out = []
    for given in items:
        item = given.strip().lower()
        if item in ("*", "*/*"):
            out.append("*")
        elif item:
            out.append(item[:-1] if item.endswith("/*") else item)
    return tuple(dict.fromkeys(out))


def media_type(content_type: bytes | None) -> str:
    """``b"Text/HTML; charset=x"`` -> ``"text/html"``; '' when absent."""
    if not content_type:
        return ""
    return content_type.split(b";", 1)[0].strip().lower().decode("latin-1")


@runtime_checkable
class AsksContentTypes(Protocol):
    """An item pipeline or a spider that wants more than HTML downloaded (an archive: ``*``)."""

    content_types: tuple[str, ...]


_MOVED = {
    "ContentTypeMiddleware": "larbinscrapy.middlewares.checktype.ContentTypeMiddleware",
    "BoundedDecompressionMiddleware": "larbinscrapy.middlewares.checktype.BoundedDecompressionMiddleware",
}


def __getattr__(name: str) -> Any:
    return moved(__name__, name, _MOVED)
