"""RFC 9309's reading of a robots.txt answer: what a site's pages may do, and until when.

Pure: an answer (status, or None when the server was unreachable) and a clock time in,
``SiteRules`` out; ``middlewares/robots.py`` fetches and parses, this module decides.

More in docs/modules.md (`larbinscrapy/politeness/robotsrules.py`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

PARSE = "parse"  # obey the parsed rules
ALLOW_ALL = "allow_all"  # robots.txt unavailable: everything allowed
DISALLOW_ALL = "disallow_all"  # robots.txt unreachable: nothing allowed

DAY = 86400.0


def verdict(status: int | None) -> str:
    """What a final robots.txt answer means for the site (None: no answer, unreachable)."""
    if status is None or 500 <= status < 600:  # noqa: PLR2004 - the 5xx class
        return DISALLOW_ALL
    if 200 <= status < 300:  # noqa: PLR2004 - the 2xx class
        return PARSE
    return ALLOW_ALL  # 4xx, a redirect not followed, anything else: unavailable


class SiteRules(NamedTuple):
    """A site's robots.txt state: its verdict, when it must be fetched again, its failures.

    A tuple of atoms, so the cyclic collector stops tracking it (one per site, kept all crawl).
    """

    verdict: str
    expires: float  # clock time after which robots.txt is fetched again
    errors: int = 0  # unreachable answers in a row
    failing_since: float | None = None  # clock time of the first of them


class RobotsPolicy:
    """Turns answers into ``SiteRules`` (module docstring); settings read by the caller."""

    def __init__(
        self, ttl: float, retry: float, unavailable_after: float, retry_max: float = 300.0
    ) -> None:
        self.ttl = ttl
        self.retry = retry
        self.unavailable_after = unavailable_after
        self.retry_max = retry_max

    @classmethod
    def from_settings(cls, settings: Any) -> RobotsPolicy:
        return cls(
            settings.getfloat("LARBIN_ROBOTS_TTL"),
            settings.getfloat("LARBIN_ROBOTS_RETRY"),
            settings.getfloat("LARBIN_ROBOTS_UNAVAILABLE_DAYS") * DAY,
            settings.getfloat("LARBIN_ROBOTS_RETRY_MAX"),
        )

    def answered(
        self,
        status: int | None,
        now: float,
        before: SiteRules | None = None,
        *,
        at_once: bool = False,
    ) -> SiteRules:
        """The rules after an answer ``status`` at ``now``; ``before``: the site's last rules.

        ``at_once``: ask again before the next page, no back-off (an address that never
        answered: each try counts toward ``LARBIN_IP_FAILURES_MAX``, so it is given up as fast
        as any dead address).
        """
        kind = verdict(status)
        if kind != DISALLOW_ALL:
            return SiteRules(kind, now + self.ttl)
        errors = before.errors + 1 if before is not None else 1
        since = before.failing_since if before is not None else None
        since = now if since is None else since
        if now - since >= self.unavailable_after:
            return SiteRules(ALLOW_ALL, now + self.ttl, errors, since)
        backoff = 0.0 if at_once else min(self.retry * 2 ** min(errors - 1, 32), self.ttl)
        return SiteRules(DISALLOW_ALL, now + backoff, errors, since)

    def gave_up(self, now: float, before: SiteRules | None = None) -> SiteRules:
        """Throttled past ``retry_max``: unreachable, nothing allowed until the TTL."""
        errors = before.errors + 1 if before is not None else 1
        since = before.failing_since if before is not None else None
        return SiteRules(DISALLOW_ALL, now + self.ttl, errors, now if since is None else since)

    def give_up(self, started: float, now: float, wait: float) -> bool:
        """True when a robots.txt fetch begun at ``started``, to be sent again after ``wait``
        seconds, would go past ``retry_max``."""
        return now + wait - started > self.retry_max

    def unavailable(self, now: float) -> SiteRules:
        """No answer to judge the site by (the fetch was dropped before it was sent)."""
        return SiteRules(ALLOW_ALL, now + self.ttl)

    @staticmethod
    def expired(rules: SiteRules, now: float) -> bool:
        return now >= rules.expires
