"""One download handler for every scheme of a crawl.

Scrapy builds a handler for each scheme of ``DOWNLOAD_HANDLERS``, even where ``http`` and
``https`` name the same class. A handler that owns the crawl's connections must be one: the caps
on open connections (``LARBIN_FETCH_CONNECTIONS_MAX``, from the descriptor limit) and on idle
ones are the crawl's, not each scheme's. No private name; retired if Scrapy builds a handler
class once for all the schemes it serves.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

T = TypeVar("T")

# crawler -> {handler class: its one instance}, both weak: the dict keeps no crawler or handler
# alive (Scrapy's DownloadHandlers holds the handler, the handler its crawler)
_BUILT: weakref.WeakKeyDictionary[Crawler, dict[type, weakref.ref[Any]]] = (
    weakref.WeakKeyDictionary()
)


def one_per_crawler(cls: type[T], crawler: Crawler, build: Callable[[], T]) -> T:
    """The ``cls`` built for ``crawler`` (for another scheme), else ``build()``'s."""
    built = _BUILT.setdefault(crawler, {})
    ref = built.get(cls)
    handler = ref() if ref is not None else None
    if handler is None:
        handler = build()
        built[cls] = weakref.ref(handler)
    return handler
