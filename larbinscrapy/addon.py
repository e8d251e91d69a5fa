"""larbinscrapy in any Scrapy project: ``ADDONS = {"larbinscrapy.addon.LarbinAddon": 0}``.

The add-on installs every default of ``larbinscrapy/conf/defaults.py`` at the ``addon``
priority: a project's own ``settings.py`` and ``-s`` still win. Component dicts
(``ITEM_PIPELINES``...) are merged key by key, so the project's own components stay; a
``*_BASE`` dict is installed whole. ``larbinscrapy.spiders`` joins ``SPIDER_MODULES``. It reads
``LARBIN_CONF`` (larbin.conf) and checks every declared setting (``larbinscrapy.conf.check``):
a bad value stops the crawl with one line, an old name of a renamed setting is moved to the new
one and warned about once.

Applied twice on purpose: ``update_pre_crawler_settings`` on the process's settings, before any
crawler exists (the spider and the DNS resolver are built from them), where a bad value ends the
process at once (exit status 1); ``update_settings`` on each crawler's own settings, which logs
the warnings once logging is set up. docs/addon.md (and ``COMMANDS_MODULE``;
``FEED_EXPORT_FIELDS`` is the larbin spider's own, set only when the project chose none).
"""

from __future__ import annotations

import copy
import logging
from typing import NoReturn

from scrapy.settings import BaseSettings, Settings
from scrapy.utils.log import configure_logging

from larbinscrapy.conf import check as config
from larbinscrapy.conf.defaults import SETTINGS
from larbinscrapy.conf.larbinconf import LarbinConfAddon
from larbinscrapy.fatal import fail_start
from larbinscrapy.lean import private
from larbinscrapy.lean.addon import LeanEngineAddon

logger = logging.getLogger(__name__)

PRIORITY = "addon"
SPIDERS = "larbinscrapy.spiders"
# Set by the larbin spider for its own crawls (``LarbinSpider.update_settings``), not for the
# project's: its other spiders' feeds keep every field of their items.
SPIDER_SETTINGS = frozenset({"FEED_EXPORT_FIELDS"})


def install(settings: BaseSettings) -> None:
    """Set every larbinscrapy default at the ``addon`` priority, component dicts merged."""
    for name, spec in SETTINGS.items():
        if name in SPIDER_SETTINGS:
            continue
        value = copy.deepcopy(spec.default)  # a list or dict of its own, for each settings
        current = settings[name]
        if (
            isinstance(value, dict)
            and isinstance(current, BaseSettings)
            and (not name.endswith("_BASE"))
        ):
            for key, item in value.items():  # a key the project set keeps its value
                current.set(key, item, priority=PRIORITY)
        else:
            settings.set(name, value, priority=PRIORITY)
    settings.add_to_list("SPIDER_MODULES", SPIDERS)


def _lean_engine(settings: BaseSettings) -> None:
    """The one call site of the engine replacements (``larbinscrapy.lean``, LARBIN_LEAN_ENGINE)
    and of the check of the private names larbinscrapy's own stages use (``lean/private.py``)."""
    LeanEngineAddon.apply(settings)
    private.check()


class LarbinAddon:
    """Scrapy add-on: larbin's components and defaults at ``addon`` priority (module docs)."""

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        install(settings)
        LarbinConfAddon.update_pre_crawler_settings(settings)
        try:  # the crawler process builds the DNS resolver from these before any crawler
            config.check(settings)
        except config.SettingsError as exc:
            _exit_before_start(settings, str(exc))

    def update_settings(self, settings: BaseSettings) -> None:
        install(settings)
        LarbinConfAddon().update_settings(settings)
        _lean_engine(settings)
        check(settings)


def _exit_before_start(settings: BaseSettings, message: str) -> NoReturn:
    """One line and exit status 1, before the process has started anything.

    Scrapy calls ``update_pre_crawler_settings`` before it sets logging up and outside any
    error handling of its own (an exception would end in a traceback): set logging up as the
    crawler process would, say it, and exit.
    """
    configure_logging(Settings(settings))
    logger.error("larbin: %s", message)
    raise SystemExit(1)


def check(settings: BaseSettings) -> None:
    """Stop the crawl with one line on a bad ``LARBIN_*`` value; warn about unknown names."""
    try:
        warnings = config.check(settings)
    except config.SettingsError as exc:
        raise fail_start(str(exc)) from None
    for warning in warnings:
        logger.warning("larbin: %s", warning)
