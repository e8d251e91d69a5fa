"""What a sitemap entry says of its page's pace of change, pure: the revisit hint.

The sitemap reader stores it with the queued request (``meta.REVISIT_HINT``); the revisit
rule (``larbinscrapy.revisit``) reads it when the page is first fetched.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["CHANGEFREQ", "parse_w3c_datetime", "sitemap_hint"]

# sitemap protocol: <changefreq> values, in seconds ("always" and "never" map to the bounds)
CHANGEFREQ = {
    "always": 0.0,
    "hourly": 3600.0,
    "daily": 86400.0,
    "weekly": 7 * 86400.0,
    "monthly": 30 * 86400.0,
    "yearly": 365 * 86400.0,
    "never": float("inf"),
}


def sitemap_hint(changefreq: str | None, lastmod: str | None, now: float) -> float | None:
    """Seconds between fetches a sitemap entry suggests, or ``None``.

    ``changefreq`` is the site's own word; without it, a page last modified ``A`` seconds ago
    is taken to change about every ``A`` seconds (the older, the stabler).
    """
    if changefreq:
        seconds = CHANGEFREQ.get(changefreq.strip().lower())
        if seconds is not None:
            return seconds
    if lastmod:
        modified = parse_w3c_datetime(lastmod)
        if modified is not None and modified < now:
            return now - modified
    return None


def parse_w3c_datetime(text: str) -> float | None:
    """A sitemap ``<lastmod>`` (W3C datetime: a date, or a date and time) as epoch seconds."""
    value = text.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
