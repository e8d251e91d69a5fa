"""Scrapy components that larbinscrapy turns off, imported only when a setting turns them on.

Scrapy imports the class of every key of its component dicts (``EXTENSIONS_BASE`` and
``EXTENSIONS`` included), even a key set to ``None``, before it knows the component is off. A
stand-in named here instead checks the setting first and imports and builds Scrapy's own
component only when it is on, so a crawl with it off never pays for its dependencies:

* ``TelnetConsole``: Scrapy's telnet console (``TELNETCONSOLE_ENABLED``, off in
  ``settings/base.py``: a code-running port); it imports twisted.conch.

Settings: ``TELNETCONSOLE_ENABLED`` (and the ``TELNETCONSOLE_*`` settings Scrapy's reads).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured
from scrapy.utils.misc import build_from_crawler

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class TelnetConsole:
    """Scrapy's ``TelnetConsole``, imported only when ``TELNETCONSOLE_ENABLED`` is true."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Any:
        if not crawler.settings.getbool("TELNETCONSOLE_ENABLED"):
            raise NotConfigured
        from scrapy.extensions.telnet import TelnetConsole as Scrapys

        return build_from_crawler(Scrapys, crawler)
