"""The link gate's seen test for a raw link string, with a cache of recent links in front.

Pure: no Scrapy. Most links of a page were on earlier pages too (navigation, headers, footers),
and they come back as the very same absolute strings. Canonicalising and hashing a link costs
~1.1 µs, more than the Bloom test behind it (``benchmarks/bench_dupefilter.py``); a lookup of the
raw string in a Python set costs ~0.05 µs. So the gate first asks the cache, and only a link it
has not met recently is fingerprinted and tested in the seen-set (BUbiNG keeps a URL cache in
front of its sieve for the same reason).

Sound because every larbinscrapy seen-set is monotone: once ``seen_fingerprint(fp)`` has run,
every later call for ``fp`` answers True (bits are never cleared while a crawl runs). A string
in the cache had its fingerprint tested before in this process, so the seen-set would answer
True: the cache answers exactly what the seen-set would, only sooner.

Memory is bounded: two generations of at most ``size`` strings each; when the young one is full
it becomes the old one and the former old one is dropped, and a hit in the old generation moves
the string to the young one (a cheap approximation of an LRU). With ``size`` = 32,768 links of
~80 characters that is ~9 MB at most. ``size`` 0 turns the cache off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


def url_seen_test(
    seen_fingerprint: Callable[[bytes], bool],
    fingerprint_url: Callable[[str], bytes],
    size: int,
) -> Callable[[str], bool]:
    """A function ``seen(url)``: True if the link was seen, else it is marked seen now."""
    if size < 0:
        raise ValueError(f"LARBIN_DUPEFILTER_URL_CACHE must be >= 0, got {size!r}")
    if size == 0:

        def seen_uncached(url: str) -> bool:
            return seen_fingerprint(fingerprint_url(url))

        return seen_uncached

    young: set[str] = set()
    old: set[str] = set()

    def seen(url: str) -> bool:
        nonlocal young, old
        if url in young:
            return True
        answer = url in old or seen_fingerprint(fingerprint_url(url))
        young.add(url)
        if len(young) >= size:
            old, young = young, set()
        return answer

    return seen
