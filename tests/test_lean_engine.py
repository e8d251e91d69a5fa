"""``LARBIN_LEAN_ENGINE``: the engine replacements of ``larbinscrapy/lean/`` on, off, and left out.

On, a crawler gets every lean class; off, Scrapy's own components, and the test web is still
crawled completely; a replacement whose private names are missing or changed is left out with
one warning (its check is made to fail through ``Replacement.extra``, never by patching Scrapy).
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
from scrapy import Request
from scrapy.core.downloader import Downloader
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.core.spidermw import SpiderMiddlewareManager
from scrapy.logformatter import LogFormatter
from scrapy.settings import Settings
from scrapy.signalmanager import SignalManager
from scrapy.statscollectors import DummyStatsCollector, MemoryStatsCollector
from scrapy.utils.misc import build_from_crawler, load_object
from scrapy.utils.test import get_crawler

from larbinscrapy.lean.addon import REPLACEMENTS, LeanEngineAddon, unusable
from larbinscrapy.lean.downloader import LeanDownloader, LeanMiddlewareManager
from larbinscrapy.lean.folded import DownloaderStatsMiddleware, GateRefererMiddleware
from larbinscrapy.lean.logformatter import QuietLogFormatter
from larbinscrapy.lean.request import SafeUrlRequest, request_class
from larbinscrapy.lean.requires import problem
from larbinscrapy.lean.signals import LeanSignalManager
from larbinscrapy.lean.stats import LeanStatsCollector
from settings import base
from tests.support.crawl import run_crawl, seeds_args, settings_of

SCRAPY_HANDLER = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
NO_SUCH = ("scrapy.statscollectors", "StatsCollector.no_such_name")


def _crawler(**overrides):
    return get_crawler(settings_dict=settings_of(base, **overrides))


def _components(crawler):
    """Class names of the crawl's downloader and spider middlewares and its jsonl exporter."""
    downloader = build_from_crawler(DownloaderMiddlewareManager, crawler).middlewares
    spider = build_from_crawler(SpiderMiddlewareManager, crawler).middlewares
    return {type(m).__name__ for m in (*downloader, *spider)}


def test_every_replacement_holds_on_the_installed_scrapy_and_twisted():
    assert {r.name: unusable(r) for r in REPLACEMENTS} == {r.name: [] for r in REPLACEMENTS}


def test_on_every_lean_class_is_used():
    crawler = _crawler(LARBIN_LEAN_ENGINE=True)
    s = crawler.settings
    assert type(crawler.stats) is LeanStatsCollector
    assert type(crawler.logformatter) is QuietLogFormatter
    assert load_object(s["DOWNLOADER"]) is LeanDownloader
    assert type(LeanDownloader(crawler).middleware) is LeanMiddlewareManager
    assert s["LARBIN_FETCH_HANDLER"] == "larbinscrapy.lean.http1.LeanHttpDownloadHandler"
    exporter = s.getwithbase("FEED_EXPORTERS")["jsonl"]
    assert exporter == "larbinscrapy.lean.exporters.JsonLinesExporter"
    names = _components(crawler)
    assert {"DownloaderStatsMiddleware", "StartOnlyMiddleware", "GateRefererMiddleware"} <= names
    assert not names & {"DownloaderStats", "StartSpiderMiddleware", "RefererMiddleware"}
    extensions = s.getwithbase("EXTENSIONS")
    assert "scrapy.extensions.remote_control.RemoteControl" not in extensions
    assert "larbinscrapy.lean.gcfreeze.StartupFreeze" in extensions
    assert request_class(s) is SafeUrlRequest
    assert type(crawler.signals) is LeanSignalManager


def test_off_scrapys_own_components():
    crawler = _crawler(LARBIN_LEAN_ENGINE=False)
    s = crawler.settings
    assert type(crawler.stats) is MemoryStatsCollector
    assert type(crawler.logformatter) is LogFormatter
    assert load_object(s["DOWNLOADER"]) is Downloader
    assert s["LARBIN_FETCH_HANDLER"] == SCRAPY_HANDLER
    assert s.getwithbase("FEED_EXPORTERS")["jsonl"] == "scrapy.exporters.JsonLinesItemExporter"
    names = _components(crawler)
    assert {"DownloaderStats", "StartSpiderMiddleware", "RefererMiddleware"} <= names
    assert not names & {"DownloaderStatsMiddleware", "StartOnlyMiddleware", "GateRefererMiddleware"}
    assert not any(k.startswith("larbinscrapy.lean") for k in s.getwithbase("EXTENSIONS"))
    assert request_class(s) is Request
    assert type(crawler.signals) is SignalManager


def test_a_users_own_setting_wins_over_the_addon():
    crawler = _crawler(
        STATS_CLASS="scrapy.statscollectors.DummyStatsCollector",
        LARBIN_FETCH_HANDLER=SCRAPY_HANDLER,
    )
    assert type(crawler.stats) is DummyStatsCollector
    assert crawler.settings["LARBIN_FETCH_HANDLER"] == SCRAPY_HANDLER
    assert type(crawler.logformatter) is QuietLogFormatter  # the others are still lean


@pytest.mark.parametrize(
    "entry",
    [
        NO_SUCH,
        ("scrapy.statscollectors", "StatsCollector.__getattribute__", "000000000000"),
        ("scrapy.no_such_module", "Anything"),
    ],
    ids=["missing", "changed", "no-module"],
)
def test_a_replacement_whose_check_fails_is_left_out_with_one_warning(entry, caplog):
    settings = Settings(settings_of(base))
    replacements = tuple(
        dataclasses.replace(r, extra=(entry,)) if r.name == "stats" else r for r in REPLACEMENTS
    )
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.lean.addon"):
        used = LeanEngineAddon.apply(settings, replacements)
    assert "stats" not in used and "downloader" in used
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "stats not used, Scrapy's MemoryStatsCollector instead" in warnings[0]
    assert settings["STATS_CLASS"] == "scrapy.statscollectors.MemoryStatsCollector"
    assert settings["DOWNLOADER"] == "larbinscrapy.lean.downloader.LeanDownloader"


def test_the_http_handler_falls_back_to_scrapys():
    settings = Settings(settings_of(base))
    replacements = tuple(
        dataclasses.replace(r, extra=(NO_SUCH,)) if r.name == "http1" else r for r in REPLACEMENTS
    )
    LeanEngineAddon.apply(settings, replacements)
    assert settings["LARBIN_FETCH_HANDLER"] == SCRAPY_HANDLER


def test_request_class_falls_back_when_its_check_fails():
    settings = Settings({"LARBIN_LEAN_ENGINE": True})
    assert request_class(settings) is SafeUrlRequest
    assert request_class(settings, requires=(NO_SUCH,)) is Request


def test_problem_says_what_is_missing_or_changed():
    assert problem(("scrapy.statscollectors", "StatsCollector.get_value")) is None
    assert "is missing" in problem(NO_SUCH)
    assert "cannot be imported" in problem(("scrapy.no_such_module", "X"))
    changed = problem(("scrapy.statscollectors", "StatsCollector.get_value", "000000000000"))
    assert "changed" in changed and "000000000000" in changed


def test_gate_referer_is_scrapys_with_no_output_layer():
    assert issubclass(
        GateRefererMiddleware, load_object("scrapy.spidermiddlewares.referer.RefererMiddleware")
    )
    assert issubclass(
        DownloaderStatsMiddleware, load_object("scrapy.downloadermiddlewares.stats.DownloaderStats")
    )


@pytest.mark.crawl
@pytest.mark.parametrize("lean", [True, False], ids=["lean", "scrapy"])
def test_the_test_web_is_crawled_completely_either_way(web, tmp_path, lean):
    crawl = run_crawl(
        web, tmp_path / "out", *seeds_args(web.seeds), settings={"LARBIN_LEAN_ENGINE": lean}
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["finish_reason"] == "finished"
    assert crawl.fetched(web.port) == web.web.ground_truth(web.seeds, depth=5)
    assert len(crawl.items) >= 100
    assert "LARBIN_LEAN_ENGINE:" not in crawl.stderr  # no replacement left out
    # which components ran, as the crawl shows it: the lean handler's stat, the middleware list
    assert ("larbin/http1/connections" in crawl.stats) is lean
    assert ("larbinscrapy.lean.folded.DownloaderStatsMiddleware" in crawl.stderr) is lean
    assert ("'scrapy.downloadermiddlewares.stats.DownloaderStats'" in crawl.stderr) is not lean
    assert ("LARBIN_LEAN_ENGINE is off" in crawl.stderr) is not lean


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "scrapy"])
def test_larbins_page_timeout_wraps_either_handler(lean):
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

    from larbinscrapy.fetch.deadline import PageDeadlineHandler
    from larbinscrapy.lean.http1 import LeanHttpDownloadHandler

    handler = PageDeadlineHandler.from_crawler(_crawler(LARBIN_LEAN_ENGINE=lean))
    assert type(handler.inner) is (LeanHttpDownloadHandler if lean else HTTP11DownloadHandler)
    # the lean handler times its own pages by the rule; Scrapy's is timed by the wrapper
    assert (handler._timed_inside is not None) is lean


def test_digests_tell_decorated_functions_apart():
    # Scrapy 2.19 wraps these in one decorator: the hash must be of each function's own source
    from scrapy.downloadermiddlewares.stats import DownloaderStats

    from larbinscrapy.lean.requires import digest

    methods = (
        DownloaderStats.process_request,
        DownloaderStats.process_response,
        DownloaderStats.process_exception,
    )
    assert len({digest(m) for m in methods}) == 3


def test_a_whole_module_file_is_compared_without_importing_it():
    entry = ("scrapy.core.downloader.handlers.http11", "*", "000000000000")
    assert "changed" in problem(entry)
    assert "cannot be found" in problem(("scrapy.no_such_package.mod", "*", "0"))


def test_the_crawl_collects_cycles_less_often_by_default():
    """A page leaves no reference cycles (``lean/http1conn.py``, ``seeds/turns.py``), so at
    Python's 700 allocations the cyclic collector mostly walks live state that grows with the
    hosts and finds nothing: the crawl raises the first threshold at engine start."""
    import gc

    from larbinscrapy.lean.gcfreeze import StartupFreeze

    ext = StartupFreeze.from_crawler(_crawler())
    before = gc.get_threshold()
    try:
        ext.engine_started()
        assert gc.get_threshold() == (50_000, 10, 10)
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


_TRIM_SCRIPT = """
import os
from scrapy.utils.test import get_crawler
from larbinscrapy.lean.gcfreeze import StartupFreeze
from settings import base
from tests.support.crawl import settings_of

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

crawler = get_crawler(settings_dict=settings_of(base))
ext = StartupFreeze.from_crawler(crawler)
kept, bodies = [], []
for n in range(12_000):  # 190 MB of bodies with state that lives on between them
    bodies.append(os.urandom(16_384))
    kept.append(os.urandom(600))
del bodies
freed = rss_mb()
ext.engine_started()
ext.trim()  # what the crawl's timer calls every LARBIN_MALLOC_TRIM_INTERVAL
print(freed, rss_mb(), ext._trim_loop is not None)
ext.engine_stopped()
"""


def test_freed_response_bodies_go_back_to_the_system():
    """Response bodies are freed once parsed, but the state that lives on between them keeps
    glibc from giving their memory back: a broad crawl's resident memory grew with every page
    it had read. The crawl calls ``malloc_trim`` on a timer (``LARBIN_MALLOC_TRIM_INTERVAL``)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    run = subprocess.run(
        [sys.executable, "-c", _TRIM_SCRIPT], cwd=root, capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr[-2000:]
    freed, trimmed, timer = run.stdout.split()
    assert timer == "True"  # on by default
    assert float(freed) - float(trimmed) > 95, run.stdout  # half the bodies' 190 MB at least
