"""``scrapy crawl``, exit status 1 after a fatal error (``lean/crawlcommand.py``)."""

from __future__ import annotations

from larbinscrapy.lean.crawlcommand import Command as FatalExitCrawl


class Command(FatalExitCrawl):
    """Scrapy finds a command by the module that defines its class: this one, not lean/'s."""
