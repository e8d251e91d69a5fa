"""Exceptions with a reason that stats and logs read as an attribute, never parsed from text."""

from __future__ import annotations

from scrapy.exceptions import IgnoreRequest


class DroppedRequest(IgnoreRequest):
    """A request dropped on purpose; ``reason`` names the ``larbin/dropped/<reason>`` stat."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
