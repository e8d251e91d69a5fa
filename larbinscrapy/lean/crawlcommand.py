"""``scrapy crawl`` whose exit status is 1 when the crawl ended on a fatal error
(``larbinscrapy.fatal``), so scripts, scrapyd and cron can tell it from a finished crawl.

Replaces: Scrapy's ``crawl`` command (``COMMANDS_MODULE``: ``larbinscrapy/commands/crawl.py``).
Private names: ``BaseRunSpiderCommand._create_crawler`` (to keep the crawlers it makes).
Retire when: Scrapy's ``crawl`` sets a non-zero exit status for a crawl that closed on an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.commands.crawl import Command as ScrapyCrawl

from larbinscrapy import fatal

if TYPE_CHECKING:
    import argparse

    from scrapy import Spider
    from scrapy.crawler import Crawler

    from larbinscrapy.lean.requires import Private


REQUIRES: tuple[Private, ...] = (
    ("scrapy.commands", "BaseRunSpiderCommand._create_crawler", "65aff0306209"),
)


class Command(ScrapyCrawl):
    """``scrapy crawl``, plus exit status 1 for a ``larbinscrapy.fatal`` finish reason."""

    def __init__(self) -> None:
        super().__init__()
        self._crawlers: list[Crawler] = []

    def _create_crawler(self, spidercls: type[Spider] | str) -> Crawler:
        crawler = super()._create_crawler(spidercls)
        self._crawlers.append(crawler)
        return crawler

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)
        for crawler in self._crawlers:
            try:
                stats = crawler.stats
            except RuntimeError:  # the crawl never started (Scrapy already set the exit code)
                continue
            if stats.get_value("finish_reason") in fatal.REASONS:
                self.exitcode = 1
