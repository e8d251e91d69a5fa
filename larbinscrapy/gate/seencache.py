"""The link gate's seen test for a raw link string, with a cache of recent links in front.

Pure: no Scrapy. Most links of a page were on earlier pages too (navigation, headers, footers),
and they come back as the very same absolute strings. Canonicalising and hashing a link costs
~1.1 µs, more than the Bloom test behind it (``benchmarks/bench_dupefilter.py``), and the link
filters before it ~2.5 µs; a lookup of the raw string in a dict costs ~0.05 µs. So the gate
first asks the cache (``known``), and only a link it has not met recently goes through the
filters, is fingerprinted and tested in the seen-set (``seen``). BUbiNG keeps a URL cache in
front of its sieve for the same reason.

Sound because every larbinscrapy seen-set is monotone: once ``seen_fingerprint(fp)`` has run,
every later call for ``fp`` answers True (bits are never cleared while a crawl runs). A link
in the cache had its fingerprint tested before in this process, so the seen-set would answer
True: the cache answers exactly what the seen-set would, only sooner (but for the hash collision
below). The gate calls ``seen`` only for links that passed its URL filters, so a cached link
also passed every filter that
depends on the URL alone; what depends on the linking page (external links, depth in the site)
the gate still checks on a hit, with the host the cache keeps for it.

The cache keeps a link's ``hash()`` (64 bits, the one str caches on itself), not the link: a
string of ~50 characters costs ~120 bytes, and the hosts are interned, so an entry costs ~75
bytes instead of ~175 and the same memory holds 2.3x the links (measured with tracemalloc).
Two links with the same hash would make the second one seen: a chance of 2^-64 per entry held,
far below the Bloom filter's own false-positive rate behind it, and not one an adversary can
aim at, since str hashing is keyed (SipHash) per process.

Memory is bounded: two generations of at most ``size`` links each; when the young one is full
it becomes the old one and the former old one is dropped, and a hit in the old generation moves
the link to the young one (a cheap approximation of an LRU). With ``size`` = 65,536 that is
~10 MB at most. ``size`` 0 turns the cache off.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class SeenLinks:
    """``known(url)`` then ``seen(url, host)``: the gate's seen test, see the module docstring."""

    __slots__ = ("_fingerprint_url", "_old", "_seen_fingerprint", "_young", "size")

    def __init__(
        self,
        seen_fingerprint: Callable[[bytes], bool],
        fingerprint_url: Callable[[str], bytes],
        size: int,
    ) -> None:
        if size < 0:
            raise ValueError(f"LARBIN_DUPEFILTER_URL_CACHE must be >= 0, got {size!r}")
        self._seen_fingerprint = seen_fingerprint
        self._fingerprint_url = fingerprint_url
        self.size = size
        self._young: dict[int, str] = {}  # hash(raw link) -> its host
        self._old: dict[int, str] = {}

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
