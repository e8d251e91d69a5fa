"""Scrapy components that larbinscrapy turns off, imported only when a setting turns them on.

Scrapy imports the class of every key of its component dicts (``EXTENSIONS_BASE`` and
``EXTENSIONS`` included), even a key set to ``None``, before it knows the component is off. A
stand-in named here instead checks the setting first and imports and builds Scrapy's own
component only when it is on, so a crawl with it off never pays for its dependencies:

* ``TelnetConsole``: Scrapy's telnet console (``TELNETCONSOLE_ENABLED``, off in
  ``settings/base.py``: a code-running port); it imports twisted.conch.
* ``CookiesMiddleware``: Scrapy's cookies middleware (``COOKIES_ENABLED``, off: broad crawls
  keep no sessions); importing it (for tldextract) costs ~45 ms of every crawl's start-up.

Settings: ``TELNETCONSOLE_ENABLED`` and ``COOKIES_ENABLED`` (and the settings Scrapy's
components read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


def _scrapys_if_on(crawler: Crawler, setting: str, path: str) -> Any:
    """Scrapy's component at ``path``, built only when ``setting`` is true."""
    if not crawler.settings.getbool(setting):
        raise NotConfigured
    return build_from_crawler(load_object(path), crawler)


class TelnetConsole:
    """Scrapy's ``TelnetConsole``, imported only when ``TELNETCONSOLE_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        return _scrapys_if_on(crawler, "TELNETCONSOLE_ENABLED",
                              "scrapy.extensions.telnet.TelnetConsole")


class CookiesMiddleware:
    """Scrapy's ``CookiesMiddleware``, imported only when ``COOKIES_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        return _scrapys_if_on(crawler, "COOKIES_ENABLED",
                              "scrapy.downloadermiddlewares.cookies.CookiesMiddleware")
