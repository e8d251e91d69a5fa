"""The link gate's seen test for a raw link string, with a bounded cache of recent links in front
(exact, because every seen-set is monotone)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.seen import SeenSet


def _nothing() -> None:
    return None


class SeenLinks:
    """``known(url)`` then ``seen(url, host)``: the gate's seen test, see the module docstring."""

    __slots__ = (
        "_fingerprint_url",
        "_old",
        "_seen_fingerprint",
        "_young",
        "hold",
        "release",
        "size",
    )

    def __init__(
        self,
        seen_fingerprint: Callable[[bytes], bool],
        fingerprint_url: Callable[[str], bytes],
        size: int,
        hold: Callable[[], None] = _nothing,
        release: Callable[[], None] = _nothing,
    ) -> None:
        if size < 0:
            raise ValueError(f"LARBIN_GATE_URL_CACHE must be >= 0, got {size!r}")
        self._seen_fingerprint = seen_fingerprint
        self._fingerprint_url = fingerprint_url
        self.size = size
        # around the hand-over of a link just marked seen (SeenSet.hold / release)
        self.hold, self.release = hold, release
        self._young: dict[int, str] = {}  # hash(raw link) -> its host
        self._old: dict[int, str] = {}

    @classmethod
    def over(cls, seen: SeenSet, fingerprint_url: Callable[[str], bytes], size: int) -> SeenLinks:
        """The crawl's ``seen`` set behind the cache, its hold and release included."""
        return cls(seen.seen_fingerprint, fingerprint_url, size, seen.hold, seen.release)

    def known(self, url: str) -> str | None:
        """The host of ``url`` if this very string went through ``seen`` recently, else None.

        A known link is seen: the seen-set would answer True for it.
        """
        key = hash(url)
        host = self._young.get(key)
        if host is None and self._old:
            host = self._old.get(key)
            if host is not None:
                self._remember(key, host)
        return host

    def seen(self, url: str, host: str) -> bool:
        """True if ``url`` was seen; else it is marked seen now. Only for filtered links."""
        answer = self._seen_fingerprint(self._fingerprint_url(url))
        if self.size:
            self._remember(hash(url), sys.intern(host))
        return answer

    def __call__(self, url: str, host: str = "") -> bool:
        """``known`` or ``seen``, for a caller with no filter to run in between."""
        return self.known(url) is not None or self.seen(url, host)

    def __len__(self) -> int:
        """How many links the cache holds now (at most 2 x ``size``)."""
        return len(self._young) + len(self._old)

    def _remember(self, key: int, host: str) -> None:
        young = self._young
        young[key] = host
        if len(young) >= self.size:
            self._old, self._young = young, {}
