"""Settings profiles. ``settings`` (this package) is the embedded default: the base profile."""

from settings.base import *  # noqa: F403
