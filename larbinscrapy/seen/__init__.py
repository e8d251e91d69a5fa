"""The seen-set: larbin's hashTable, one bit test per URL instead of a set of fingerprints.

Owns the bit arrays (bitmap, Bloom, scalable chain), their JOBDIR files and the DUPEFILTER_CLASS.
``SeenSet`` is what other components ask of it per link; the frontier exposes the crawl's as
``Frontier.seen`` (``larbinscrapy.frontier.seen_set_of``). ``SavedSeenSet`` is what the local
frontier asks of one kept in JOBDIR (``BitmapDupeFilter``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SavedSeenSet", "SeenSet"]


@runtime_checkable
class SeenSet(Protocol):
    """What the link gate and the sitemap reader ask of the crawl's dupefilter, per link."""

    def seen_fingerprint(self, fp: bytes) -> bool:
        """Mark ``fp`` seen; True when it already was."""

    def knows_fingerprint(self, fp: bytes) -> bool:
        """True when ``fp`` is marked seen, without marking it."""

    def count_filtered(self, n: int) -> None:
        """Count ``n`` links dropped as seen (``larbin/dupefilter/filtered``)."""

    def hold(self) -> None:
        """The newest key marked belongs to a link on its way to the scheduler: it stays off
        the disk until ``release`` (a bit on disk before its URL's record is a URL lost)."""

    def release(self) -> None:
        """The link of a ``hold`` reached the scheduler (or was dropped)."""


@runtime_checkable
class SavedSeenSet(Protocol):
    """A seen-set kept in JOBDIR, as the frontier that owns it asks it (flushes, fill, errors)."""

    @property
    def fill_ratio(self) -> float:
        """The share of its bits set."""

    @property
    def estimated_fp_rate(self) -> float:
        """The chance that an unseen URL is taken for a seen one, now."""

    def flush(self) -> None:
        """Hand the journal's buffered lines to the OS (after the frontier's records)."""

    def write_after(self, flush_records: Callable[[], None]) -> None:
        """Call ``flush_records`` before any write of its own clock (journal, snapshot)."""

    def abandon(self) -> None:
        """The job directory failed: stop writing, and keep what is on disk as it is."""
