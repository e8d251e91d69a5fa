"""Whether a crawl is about to meet the real web with nobody to contact.

A site owner whose server a crawler hammers looks for a way to reach its operator: a
``User-Agent`` that names the bot and where to read about it, or a ``From`` header
(``LARBIN_FROM``, RFC 9110). The default ``USER_AGENT`` names the software, not whoever runs it.
``missing`` decides; the spider logs one line with what to set when it answers True. Seeds on
loopback or under names reserved for tests (RFC 6761: ``.test``, ``.localhost``, ``.invalid``,
``.example``) are not the real web: tests and ``make demo`` stay quiet.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from collections.abc import Iterable

# Where the default user agents point: the software's home, not the crawl's operator
# (settings/base.py's "larbinscrapy/0.1 (+https://github.com/larbinscrapy/...)", Scrapy's own).
_SOFTWARE_HOMES = ("github.com/larbinscrapy/larbinscrapy", "scrapy.org")
_RESERVED_NAMES = ("localhost", "test", "invalid", "example")

HINT = (
    "larbin: this crawl reaches the web with the placeholder USER_AGENT and no LARBIN_FROM, "
    "so a site owner has nobody to contact: set both, e.g. -s 'USER_AGENT=mybot/1.0 "
    "(+https://example.org/bot.html)' -s LARBIN_FROM=crawler@example.org "
    "(docs/politeness.md)"
)


def is_placeholder(user_agent: str) -> bool:
    """True when ``user_agent`` names only the software (or is empty)."""
    return not user_agent.strip() or any(home in user_agent for home in _SOFTWARE_HOMES)


def is_real_web(url: str) -> bool:
    """False for a loopback address or a name reserved for tests, True for anything else."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.rpartition(".")[2] not in _RESERVED_NAMES


def missing(user_agent: str, from_address: str, urls: Iterable[str]) -> bool:
    """True when no contact is set and one of ``urls`` is on the real web."""
    if from_address.strip() or not is_placeholder(user_agent):
        return False
    return any(is_real_web(url) for url in urls)
