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

from scrapy.utils.misc import load_object

from settings import base

LARBIN_DEFAULTS = {k: v for k, v in vars(base).items() if k.startswith("LARBIN_")}
LEAN_HANDLER = "larbinscrapy.lean.http1.LeanHttpDownloadHandler"


@dataclass(frozen=True)
class Suite:
    """One test module of Scrapy's and how it is pointed at our class."""

    module: str  # path inside the sdist
    bind: dict[str, str] = field(default_factory=dict)  # name in the module -> our class
    class_attrs: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # added to every get_crawler()...
    helpers: tuple[str, ...] = ()  # ...of the module and of these helper modules of Scrapy's tests
    classes: tuple[str, ...] | None = None


def _handler_settings(https: bool) -> dict[str, Any]:
    handlers = {"http": LEAN_HANDLER}
    if https:
        handlers["https"] = LEAN_HANDLER
    return {**LARBIN_DEFAULTS, "DOWNLOAD_HANDLERS": handlers}


# The lean handler serves plain http itself and hands https and proxies to Scrapy's handler, so
# the https and proxy classes test that hand-over today, and the handler's own https once it
# has it (issue #25): HTTPS also routes the crawler tests' https:// URLs to it.
HTTPS = True
LEAN_DOWNLOADER = {"DOWNLOADER": "larbinscrapy.lean.downloader.LeanDownloader"}
LEAN_ENGINE = {  # what LeanEngineAddon sets for the engine itself
    **LEAN_DOWNLOADER,
    "STATS_CLASS": "larbinscrapy.lean.stats.LeanStatsCollector",
    "LOG_FORMATTER": "larbinscrapy.lean.logformatter.QuietLogFormatter",
    "EXTENSIONS": {"larbinscrapy.lean.signals.LeanSignals": -1000},  # crawler.signals: ours
}
ENGINE = ("tests.utils.engine",)  # CrawlerRun builds its crawler there

SUITES: tuple[Suite, ...] = (
    # the HTTP/1.1 download handler (LARBIN_FETCH_HANDLER)
    Suite(
        "tests/test_downloader_handler_twisted_http11.py",
        bind={"HTTP11DownloadHandler": LEAN_HANDLER},
        class_attrs={"settings_dict": _handler_settings(HTTPS)},
        settings=LARBIN_DEFAULTS,  # the handler's own settings (LARBIN_FETCH_IDLE_TIMEOUT)
        helpers=("tests.utils.bases.download_handlers_http",),
    ),
    # the downloader-middleware manager (LeanDownloader's chain)
    Suite(
        "tests/test_downloadermiddleware.py",
        bind={"DownloaderMiddlewareManager": "larbinscrapy.lean.downloader.LeanMiddlewareManager"},
    ),
    # the downloader (DOWNLOADER), built directly and through the engine
    Suite(
        "tests/test_core_downloader.py",
        bind={"Downloader": "larbinscrapy.lean.downloader.LeanDownloader"},
        classes=("TestJitterSetting",),  # the others test Slot and TLS parts we do not replace
    ),
    Suite(
        "tests/test_downloaderslotssettings.py",
        bind={"Downloader": "larbinscrapy.lean.downloader.LeanDownloader"},
        settings=LEAN_DOWNLOADER,
    ),
    Suite("tests/test_engine.py", settings=LEAN_ENGINE, helpers=ENGINE),
    Suite("tests/test_engine_download.py", settings=LEAN_ENGINE, helpers=ENGINE),
    Suite("tests/test_engine_stop_download_bytes.py", settings=LEAN_ENGINE, helpers=ENGINE),
    Suite("tests/test_engine_stop_download_headers.py", settings=LEAN_ENGINE, helpers=ENGINE),
    # the JSON lines exporter (FEED_EXPORTERS jsonl, jsonlines)
    Suite(
        "tests/test_exporters.py",
        bind={"JsonLinesItemExporter": "larbinscrapy.lean.exporters.JsonLinesExporter"},
        classes=("TestJsonLinesItemExporter", "TestJsonLinesItemExporterDataclass"),
    ),
    # the log formatter (LOG_FORMATTER): Scrapy's messages whenever DEBUG is logged
    Suite(
        "tests/test_logformatter.py",
        bind={"LogFormatter": "larbinscrapy.lean.logformatter.QuietLogFormatter"},
        settings={"LOG_FORMATTER": "larbinscrapy.lean.logformatter.QuietLogFormatter"},
        classes=("TestLogFormatter", "TestShowOrSkipMessages"),
    ),
    # the request class the gate and the frontier build (lean.request.request_class)
    Suite(
        "tests/test_http_request.py",
        class_attrs={"request_class": load_object("larbinscrapy.lean.request.SafeUrlRequest")},
        classes=("TestRequest",),
    ),
    # the stats collector (STATS_CLASS)
    Suite(
        "tests/test_stats.py",
        bind={"StatsCollector": "larbinscrapy.lean.stats.LeanStatsCollector"},
    ),
    # the start middleware without its output layer (lean/folded.py)
    Suite(
        "tests/test_spidermiddleware_start.py",
        bind={"StartSpiderMiddleware": "larbinscrapy.lean.folded.StartOnlyMiddleware"},
    ),
    # the downloader stats middleware (lean/folded.py)
    Suite(
        "tests/test_downloadermiddleware_stats.py",
        bind={"DownloaderStats": "larbinscrapy.lean.folded.DownloaderStatsMiddleware"},
    ),
    # the signal manager (crawler.signals, lean/signals.py): the manager itself, and the sends
    # Scrapy's tests make through its module-level functions (conformance/signals.py routes them)
    Suite(
        "tests/test_signalmanager.py",
        bind={"SignalManager": "larbinscrapy.lean.signals.LeanSignalManager"},
    ),
    Suite(
        "tests/test_utils_signal.py",
        bind={
            "send_catch_log": "conformance.signals.send_catch_log",
            "send_catch_log_async": "conformance.signals.send_catch_log_async",
        },
        classes=(  # the others test send_catch_log_deferred, which the manager keeps as Scrapy's
            "TestSendCatchLog",
            "TestSendCatchLogAsync",
            "TestSendCatchLogAsync2",
            "TestSendCatchLogAsyncAsyncDef",
            "TestSendCatchLogAsyncAsyncio",
            "TestSendCatchLog2",
        ),
    ),
)
