"""The seeds' revisit rule, pure: when is a page fetched again."""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True, slots=True)
class RevisitRule:
    """The rule's numbers (``LARBIN_REVISIT_*``)."""

    initial: float
    minimum: float
    maximum: float
    streak: int = 5
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.minimum <= self.maximum:
            raise ValueError(
                f"LARBIN_REVISIT_INTERVAL_MIN ({self.minimum}) must be > 0 and <= "
                f"LARBIN_REVISIT_INTERVAL_MAX ({self.maximum})"
            )
        if self.streak < 1 or self.factor <= 1:
            raise ValueError("LARBIN_REVISIT_STREAK must be >= 1 and LARBIN_REVISIT_FACTOR > 1")

    def clamp(self, seconds: float) -> float:
        return min(self.maximum, max(self.minimum, seconds))

    def first(self, hint: float | None = None) -> float:
        """The interval a newly fetched page starts with."""
        return self.clamp(self.initial if hint is None else hint)

    def update(self, interval: float, streak: int, changed: bool) -> tuple[float, int]:
        """The page's (interval, streak) after one more fetch."""
        # a run of changed fetches counts down from 0, a run of unchanged ones up
        streak = min(streak, 0) - 1 if changed else max(streak, 0) + 1
        if streak >= self.streak:
            return self.clamp(interval * self.factor), 0
        if -streak >= self.streak:
            return self.clamp(interval / self.factor), 0
        return self.clamp(interval), streak

    def wait(self, interval: float, fresh_for: float | None) -> float:
        """Seconds until the next fetch: the interval, or longer while the response is fresh."""
        if fresh_for is None:
            return interval
        return max(interval, self.clamp(fresh_for))


def bucket_width(bucket: float, minimum: float) -> float:
    """The schedule's bucket width: ``LARBIN_REVISIT_BUCKET``, at most an eighth of the shortest
    interval. A due page waits for its bucket to pass (one width) and for the next look (one
    width at most), so no page is revisited later than its interval plus a quarter of it."""
    return min(bucket, minimum / 8)


def freshness(
    cache_control: bytes | None, expires: bytes | None, date: bytes | None, now: float
) -> float | None:
    """A response's freshness lifetime in seconds (RFC 9111: max-age wins over Expires)."""
    if cache_control:
        for directive in cache_control.lower().split(b","):
            name, _, value = directive.strip().partition(b"=")
            if name == b"max-age":
                try:
                    return float(int(value.strip(b'" ')))
                except ValueError:
                    return None
    if expires:
        expires_at = http_date(expires)
        if expires_at is None:
            return 0.0  # RFC 9111 4.2.1: an invalid Expires means "already expired"
        origin = http_date(date) if date else None
        return max(0.0, expires_at - (origin if origin is not None else now))
    return None


def http_date(value: bytes) -> float | None:
    """An HTTP date (IMF-fixdate and the obsolete forms) as epoch seconds, or ``None``."""
    try:
        return parsedate_to_datetime(value.decode("latin-1")).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
