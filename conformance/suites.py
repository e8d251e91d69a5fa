"""Which of Scrapy's test modules run against which of our classes.

A suite names a test module of Scrapy's sdist, the module-level names rebound in it (the class
under test, as the module imported it), attributes set on each of its test classes (a subclass
of the same name, so node ids stay Scrapy's), extra settings every ``get_crawler`` of the module
gets (the test's own settings win), and the test classes chosen (``None``: every one).
Excluded tests, each with its reason, are in ``excluded.txt``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from settings import base

LARBIN_DEFAULTS = {k: v for k, v in vars(base).items() if k.startswith("LARBIN_")}
LEAN_HANDLER = "larbinscrapy.lean.http1.LeanHttpDownloadHandler"


@dataclass(frozen=True)
class Suite:
    """One test module of Scrapy's and how it is pointed at our class."""

    module: str  # path inside the sdist
    bind: dict[str, str] = field(default_factory=dict)  # name in the module -> our class
    class_attrs: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # added to every get_crawler()
    classes: tuple[str, ...] | None = None


def _handler_settings(https: bool) -> dict[str, Any]:
    handlers = {"http": LEAN_HANDLER}
    if https:
        handlers["https"] = LEAN_HANDLER
    return {**LARBIN_DEFAULTS, "DOWNLOAD_HANDLERS": handlers}


# The lean handler serves plain http and hands https and proxies to Scrapy's handler
# (issue #25 brings https to it): HTTPS_CLASSES run through it too once HTTPS is True.
HTTPS = False
HTTP_CLASSES = ("TestHttp", "TestHttpWithCrawler", "TestHttpProxy")
HTTPS_CLASSES = ("TestHttps", "TestSimpleHttps", "TestHttpsWrongHostname",
                 "TestHttpsInvalidDNSId", "TestHttpsInvalidDNSPattern", "TestHttpsCustomCiphers",
                 "TestHttpsTLSVersion", "TestHttpsWithCrawler", "TestHttpsProxy")

SUITES: tuple[Suite, ...] = (
    # the HTTP/1.1 download handler (LARBIN_HTTP_HANDLER)
    Suite(
        "tests/test_downloader_handler_twisted_http11.py",
        bind={"HTTP11DownloadHandler": LEAN_HANDLER},
        class_attrs={"settings_dict": _handler_settings(HTTPS),
                     "default_handler_settings": LARBIN_DEFAULTS},
        classes=HTTP_CLASSES + (HTTPS_CLASSES if HTTPS else ()),
    ),
    # the downloader-middleware manager (LeanDownloader's chain)
    Suite(
        "tests/test_downloadermiddleware.py",
        bind={"DownloaderMiddlewareManager": "larbinscrapy.lean.downloader.LeanMiddlewareManager"},
    ),
    # the downloader, through the engine (DOWNLOADER)
    Suite(
        "tests/test_engine_download.py",
        settings={"DOWNLOADER": "larbinscrapy.lean.downloader.LeanDownloader"},
    ),
    Suite(
        "tests/test_engine.py",
        settings={"DOWNLOADER": "larbinscrapy.lean.downloader.LeanDownloader"},
    ),
    # the JSON lines exporter (FEED_EXPORTERS jsonl, jsonlines)
    Suite(
        "tests/test_exporters.py",
        bind={"JsonLinesItemExporter": "larbinscrapy.lean.exporters.JsonLinesExporter"},
        classes=("TestJsonLinesItemExporter", "TestJsonLinesItemExporterDataclass"),
    ),
    # the stats collector (STATS_CLASS)
    Suite(
        "tests/test_stats.py",
        bind={"StatsCollector": "larbinscrapy.lean.stats.LeanStatsCollector"},
    ),
    # the downloader stats middleware (lean/folded.py)
    Suite(
        "tests/test_downloadermiddleware_stats.py",
        bind={"DownloaderStats": "larbinscrapy.lean.folded.DownloaderStatsMiddleware"},
    ),
)
