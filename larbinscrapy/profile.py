"""This repository's Scrapy project settings, inside the package: what a scrapyd egg runs.

``settings/base.py`` (the repository's profile, ``scrapy.cfg``) imports it; the egg's entry
point (``[project.entry-points.scrapy] settings`` in pyproject.toml) names it, so
``pip install larbinscrapy`` installs no top-level ``settings`` module. Every default comes from
``larbinscrapy/conf/defaults.py`` (imported here: the profile reads as one list) and
``LarbinAddon`` checks them at start; a project of its own needs only the ``ADDONS`` line below.
"""

from __future__ import annotations

from larbinscrapy.conf.defaults import *  # noqa: F403

BOT_NAME = "larbinscrapy"
SPIDER_MODULES = ["larbinscrapy.spiders"]
NEWSPIDER_MODULE = "larbinscrapy.spiders"
ADDONS = {"larbinscrapy.addon.LarbinAddon": 0}  # checks LARBIN_*, reads LARBIN_CONF (larbin.conf)
# scrapy addurls; scrapy crawl exits 1 when a crawl stops on a fatal error
COMMANDS_MODULE = "larbinscrapy.commands"
