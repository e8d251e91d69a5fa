"""Old import paths of classes that moved, kept working for users' settings.

A settings dict (``DOWNLOADER_MIDDLEWARES``...) names a class by its path, so when a class moves
(every middleware now lives in ``larbinscrapy/middlewares/``) its old module keeps a module
``__getattr__`` that answers through ``moved``: one ``ScrapyDeprecationWarning`` naming the new
path, as Scrapy's own ``update_classpath`` says for its moved classes. The class is loaded by
path (``load_object``, the way Scrapy loads a setting's class), so an old module adds no import
to the package's layers (``[tool.importlinter]`` in pyproject.toml).
"""

from __future__ import annotations

import warnings
from typing import Any

from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.utils.misc import load_object

__all__ = ["moved"]


def moved(module: str, name: str, table: dict[str, str]) -> Any:
    """``module.name`` where ``table`` (old name -> new path) says it went, with one warning."""
    path = table.get(name)
    if path is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} moved to {path}: update the path in your settings",
        ScrapyDeprecationWarning,
        stacklevel=3,
    )
    return load_object(path)
