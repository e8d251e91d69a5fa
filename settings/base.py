"""The base profile: this repository's project settings on top of ``larbinscrapy``'s defaults.

Every default, with what it takes and what it means, is declared once in
``larbinscrapy/conf/defaults.py`` (``docs/settings.md`` lists them); ``larbinscrapy/profile.py`` adds
the project's own (``BOT_NAME``, ``ADDONS``, ``COMMANDS_MODULE``) and is what a scrapyd egg
runs. Other profiles (``settings.distributed``) start with ``from settings.base import *`` and
change what differs here, one line each.
"""

from __future__ import annotations

from larbinscrapy.profile import *  # noqa: F403
