"""``SafeUrlRequest``: a ``Request`` that skips ``safe_url_string`` for URLs already safe.

Replaces: ``scrapy.Request``'s URL normalisation for the URLs the gate and the frontier build
(``request_class``).
Private names: ``Request._set_url`` (overridden), ``Request._url`` (read by ``Request.url``).
Retire when: Scrapy lets a caller pass a URL it vouches for (no such API in 2.19).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import Request

from larbinscrapy.lean.requires import problems
from larbinscrapy.parse.links import is_safe_url

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = (
    ("scrapy.http.request", "Request._set_url", "39975030b3d5"),
    ("scrapy.http.request", "Request.url", "d28d05ecfcde"),
)


class SafeUrlRequest(Request):
    """A ``Request`` that keeps a URL ``safe_url_string`` would return unchanged.

    The gate's URLs come out of the link scanner and the frontier's out of a ``Request``, so
    they are safe already; any other URL goes through Scrapy's ``_set_url``, errors included.
    """

    def _set_url(self, url: str) -> None:
        if is_safe_url(url):
            self._url = url
        else:
            super()._set_url(url)


def request_class(
    settings: BaseSettings, requires: tuple[Private, ...] = REQUIRES
) -> type[Request]:
    """The class the gate and the frontier build requests with: ours under ``LARBIN_LEAN_ENGINE``.

    The same check as ``LeanEngineAddon``'s (which logs the warning when it fails).
    """
    if settings.getbool("LARBIN_LEAN_ENGINE") and not problems(requires):
        return SafeUrlRequest
    return Request
