"""``LeanEngineAddon``: ``LARBIN_LEAN_ENGINE`` puts the engine replacements of ``lean/`` in place.

On (the default), each replacement whose private Scrapy/Twisted names hold (``requires.py``)
is set at the ``addon`` priority, so a user's own settings and ``-s`` still win; one whose names
are missing or changed is left out with one WARNING line, and Scrapy's component runs instead.
Off, nothing is set: the crawl runs on Scrapy's downloader, HTTP/1.1 handler (still wrapped by
``PageDeadlineHandler``), stats collector, log formatter, exporters, middlewares and ``Request``.
``settings/base.py`` names none of these classes: this add-on is the one place that does.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from larbinscrapy.lean.requires import problems

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.settings import BaseSettings

    from larbinscrapy.lean.requires import Private

logger = logging.getLogger(__name__)

SCRAPY_HTTP_HANDLER = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
LEAN_HTTP_HANDLER = "larbinscrapy.lean.http1.LeanHttpDownloadHandler"
_PRIORITY = "addon"


def _set(settings: BaseSettings, name: str, value: str) -> None:
    settings.set(name, value, _PRIORITY)


def _swap(settings: BaseSettings, name: str, scrapys: str, ours: str, order: int) -> None:
    """In the component dict ``name``: Scrapy's component off, ours at ``order``."""
    components = settings[name]
    components.set(scrapys, None, _PRIORITY)
    components.set(ours, order, _PRIORITY)


def _unlist(settings: BaseSettings, name: str, scrapys: str, ours: str) -> None:
    """Scrapy's component out of the base dict ``name`` (not even imported), ours in its place."""
    components = settings[name]
    if scrapys not in components:
        return
    order = components[scrapys]
    components.delete(scrapys, _PRIORITY)
    if scrapys not in components:  # a user's own base dict (higher priority) is left as it is
        components.set(ours, order, _PRIORITY)


def _downloader(settings: BaseSettings) -> None:
    _set(settings, "DOWNLOADER", "larbinscrapy.lean.downloader.LeanDownloader")


def _stats(settings: BaseSettings) -> None:
    _set(settings, "STATS_CLASS", "larbinscrapy.lean.stats.LeanStatsCollector")


def _logformatter(settings: BaseSettings) -> None:
    _set(settings, "LOG_FORMATTER", "larbinscrapy.lean.logformatter.QuietLogFormatter")


def _exporters(settings: BaseSettings) -> None:
    for fmt in ("jsonl", "jsonlines"):
        settings["FEED_EXPORTERS"].set(
            fmt, "larbinscrapy.lean.exporters.JsonLinesExporter", _PRIORITY
        )


def _http1(settings: BaseSettings) -> None:
    _http_handler(settings, LEAN_HTTP_HANDLER)


def _http_handler(settings: BaseSettings, path: str) -> None:
    """``LARBIN_FETCH_HANDLER`` left empty (the default) means: the switch chooses."""
    if not settings["LARBIN_FETCH_HANDLER"]:
        priority = settings.getpriority("LARBIN_FETCH_HANDLER") or 0
        settings.set("LARBIN_FETCH_HANDLER", path, priority)


def _folded(settings: BaseSettings) -> None:
    folded = "larbinscrapy.lean.folded."
    _swap(
        settings,
        "SPIDER_MIDDLEWARES",
        "scrapy.spidermiddlewares.start.StartSpiderMiddleware",
        folded + "StartOnlyMiddleware",
        25,
    )
    _swap(
        settings,
        "SPIDER_MIDDLEWARES",
        "scrapy.spidermiddlewares.referer.RefererMiddleware",
        folded + "GateRefererMiddleware",
        700,
    )
    _swap(
        settings,
        "DOWNLOADER_MIDDLEWARES",
        "scrapy.downloadermiddlewares.stats.DownloaderStats",
        folded + "DownloaderStatsMiddleware",
        850,
    )


def _optional(settings: BaseSettings) -> None:
    # RemoteControl (aiohttp) has no stand-in: REMOTE_CONTROL_ENABLED is off in settings/base.py;
    # to use it, add it to EXTENSIONS.
    settings["EXTENSIONS_BASE"].delete("scrapy.extensions.remote_control.RemoteControl", _PRIORITY)
    _unlist(
        settings,
        "EXTENSIONS_BASE",
        "scrapy.extensions.telnet.TelnetConsole",
        "larbinscrapy.lean.optional.TelnetConsole",
    )
    _unlist(
        settings,
        "DOWNLOADER_MIDDLEWARES_BASE",
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware",
        "larbinscrapy.lean.optional.CookiesMiddleware",
    )


def _gcfreeze(settings: BaseSettings) -> None:
    settings["EXTENSIONS"].set("larbinscrapy.lean.gcfreeze.StartupFreeze", 1000, _PRIORITY)


def _signals(settings: BaseSettings) -> None:
    # first of the extensions, so that each one built after it sees the lean manager
    settings["EXTENSIONS"].set("larbinscrapy.lean.signals.LeanSignals", -1000, _PRIORITY)


def _nothing(settings: BaseSettings) -> None:
    """The gate and the frontier ask ``lean.request.request_class`` themselves."""


@dataclass(frozen=True)
class Replacement:
    """One engine replacement: its module (``REQUIRES``), how it is set, what runs without it."""

    name: str
    module: str
    install: Callable[[BaseSettings], None]
    instead: str
    extra: tuple[Private, ...] = ()  # more names to check (tests make a check fail with it)


REPLACEMENTS: tuple[Replacement, ...] = (
    Replacement("http1", "larbinscrapy.lean.http1", _http1, "HTTP11DownloadHandler"),
    Replacement(
        "downloader", "larbinscrapy.lean.downloader", _downloader, "DownloaderMiddlewareManager"
    ),
    Replacement("stats", "larbinscrapy.lean.stats", _stats, "MemoryStatsCollector"),
    Replacement("logformatter", "larbinscrapy.lean.logformatter", _logformatter, "LogFormatter"),
    Replacement("exporters", "larbinscrapy.lean.exporters", _exporters, "JsonLinesItemExporter"),
    Replacement(
        "folded",
        "larbinscrapy.lean.folded",
        _folded,
        "StartSpiderMiddleware, RefererMiddleware and DownloaderStats",
    ),
    Replacement(
        "optional",
        "larbinscrapy.lean.optional",
        _optional,
        "EXTENSIONS_BASE and DOWNLOADER_MIDDLEWARES_BASE",
    ),
    Replacement("request", "larbinscrapy.lean.request", _nothing, "Request"),
    Replacement("gcfreeze", "larbinscrapy.lean.gcfreeze", _gcfreeze, "no gc.freeze()"),
    Replacement("signals", "larbinscrapy.lean.signals", _signals, "SignalManager"),
)


def unusable(replacement: Replacement) -> list[str]:
    """Why ``replacement`` cannot run on the installed Scrapy/Twisted (empty: it can)."""
    try:
        requires = importlib.import_module(replacement.module).REQUIRES
    except ImportError as exc:
        return [f"{replacement.module} cannot be imported ({exc})"]
    return problems((*requires, *replacement.extra))


class LeanEngineAddon:
    """Scrapy add-on (``ADDONS``): the engine replacements when ``LARBIN_LEAN_ENGINE`` is on."""

    @classmethod
    def apply(
        cls, settings: BaseSettings, replacements: tuple[Replacement, ...] = REPLACEMENTS
    ) -> list[str]:
        """Set each usable replacement at the ``addon`` priority; the names of those in use."""
        if not settings.getbool("LARBIN_LEAN_ENGINE"):
            _http_handler(settings, SCRAPY_HTTP_HANDLER)
            logger.info("LARBIN_LEAN_ENGINE is off: Scrapy's own engine components")
            return []
        used = []
        for replacement in replacements:
            reasons = unusable(replacement)
            if reasons:
                logger.warning(
                    "LARBIN_LEAN_ENGINE: %s not used, Scrapy's %s instead: %s",
                    replacement.name,
                    replacement.instead,
                    "; ".join(reasons),
                )
                continue
            replacement.install(settings)
            used.append(replacement.name)
        _http_handler(settings, SCRAPY_HTTP_HANDLER)  # when http1 was left out
        logger.debug("LARBIN_LEAN_ENGINE: %s", ", ".join(used))
        return used

    def update_settings(self, settings: BaseSettings) -> None:
        self.apply(settings)
