"""Scrapy components that larbinscrapy turns off, imported only when a setting turns them on.

Replaces: ``TelnetConsole`` in ``EXTENSIONS_BASE`` and ``CookiesMiddleware`` in
``DOWNLOADER_MIDDLEWARES_BASE`` (and drops ``RemoteControl`` from ``EXTENSIONS_BASE``). Scrapy
imports the class of every key of its component dicts, even one set to ``None``, before it knows
the component is off; these stand-ins check ``TELNETCONSOLE_ENABLED`` / ``COOKIES_ENABLED``
first and import and build Scrapy's own component only when it is on (twisted.conch, tldextract
and aiohttp are never imported by a crawl that does not use them).
Private names: none.
Retire when: Scrapy checks a component's setting before importing it (or imports lazily).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler, load_object

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private

REQUIRES: tuple[Private, ...] = ()


def _scrapys_if_on(crawler: Crawler, setting: str, path: str) -> Any:
    """Scrapy's component at ``path``, built only when ``setting`` is true."""
    if not crawler.settings.getbool(setting):
        raise NotConfigured
    return build_from_crawler(load_object(path), crawler)


class TelnetConsole:
    """Scrapy's ``TelnetConsole``, imported only when ``TELNETCONSOLE_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        return _scrapys_if_on(
            crawler, "TELNETCONSOLE_ENABLED", "scrapy.extensions.telnet.TelnetConsole"
        )


class CookiesMiddleware:
    """Scrapy's ``CookiesMiddleware``, imported only when ``COOKIES_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        return _scrapys_if_on(
            crawler, "COOKIES_ENABLED", "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"
        )
