"""This repository's settings profiles; ``settings`` (scrapy.cfg's default) is the base profile.

Not installed by ``pip install``: a scrapyd egg runs ``larbinscrapy.profile``, the same settings.
"""

from settings.base import *  # noqa: F403
