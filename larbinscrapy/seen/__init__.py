"""The seen-set: larbin's hashTable, one bit test per URL instead of a set of fingerprints.

Owns the bit arrays (bitmap, Bloom, scalable chain), their JOBDIR files and the DUPEFILTER_CLASS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


@runtime_checkable
class SeenSet(Protocol):
    """What the link gate and the sitemap reader ask of the crawl's dupefilter, per link."""

    def seen_fingerprint(self, fp: bytes) -> bool:
        """Mark ``fp`` seen; True when it already was."""

    def count_filtered(self, n: int) -> None:
        """Count ``n`` links dropped as seen (``larbin/dupefilter/filtered``)."""


def seen_set_of(crawler: Crawler) -> SeenSet | None:
    """The crawl's seen-set when its dupefilter has the per-link fast path, else None.

    The dupefilter is the scheduler's ``df`` (Scrapy's own attribute name); a dupefilter
    without ``SeenSet``'s two methods makes every link a Request checked by the scheduler.
    """
    df = getattr(crawler.engine.scheduler, "df", None) if crawler.engine else None
    return df if isinstance(df, SeenSet) else None
