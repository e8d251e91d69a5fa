"""What the status page plots and ranks: per-second rates over the last hour, busiest hosts."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

# The three counters the charts plot, by their Scrapy stats names.
PAGES = "response_received_count"
ITEMS = "item_scraped_count"
BYTES = "downloader/response_bytes"
SERIES = (("pages_per_s", PAGES), ("items_per_s", ITEMS), ("bytes_per_s", BYTES))
_PAIR = 2  # a rate is a difference: it needs two samples


@dataclass(slots=True)
class Sample:
    """The counters at one moment."""

    t: float  # wall clock, seconds
    pages: int
    items: int
    bytes: int


class RateHistory:
    """Counter samples, ``keep`` seconds of them; rates are differences between samples."""

    def __init__(self, keep: float, interval: float) -> None:
        self.samples: deque[Sample] = deque(maxlen=max(_PAIR, int(keep / interval) + 1))

    def sample(self, t: float, stats: dict[str, object]) -> None:
        self.samples.append(
            Sample(t, _int(stats.get(PAGES)), _int(stats.get(ITEMS)), _int(stats.get(BYTES)))
        )

    def rates(self, window: float = 10.0) -> dict[str, float]:
        """Average rates over the last ``window`` seconds (0 before two samples exist)."""
        if len(self.samples) < _PAIR:
            return {name: 0.0 for name, _ in SERIES}
        last = self.samples[-1]
        first = last
        for s in reversed(self.samples):
            first = s
            if last.t - s.t >= window:
                break
        return _rates(first, last)

    def series(self, since: float = 0.0) -> dict[str, list[float]]:
        """Per-interval rates after ``since`` as parallel lists ``t``, ``pages_per_s``..."""
        out: dict[str, list[float]] = {"t": []}
        for name, _ in SERIES:
            out[name] = []
        prev: Sample | None = None
        for s in self.samples:
            if prev is not None and s.t > since:
                out["t"].append(round(s.t, 3))
                for name, value in _rates(prev, s).items():
                    out[name].append(value)
            prev = s
        return out


def _rates(a: Sample, b: Sample) -> dict[str, float]:
    dt = b.t - a.t
    if dt <= 0:
        return {name: 0.0 for name, _ in SERIES}
    return {
        "pages_per_s": round((b.pages - a.pages) / dt, 3),
        "items_per_s": round((b.items - a.items) / dt, 3),
        "bytes_per_s": round((b.bytes - a.bytes) / dt, 1),
    }


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


class HostCounter:
    """Pages per host, bounded: past ``limit`` hosts the least busy half is forgotten.

    A broad crawl meets millions of hosts, most of them once; the busiest ones, which the page
    lists, survive every pruning, so the top of the list is exact in practice.
    """

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}

    def count(self, host: str) -> None:
        counts = self.counts
        counts[host] = counts.get(host, 0) + 1
        if len(counts) > self.limit:
            keep = heapq.nlargest(self.limit // 2, counts.items(), key=lambda kv: kv[1])
            self.counts = dict(keep)

    def top(self, n: int) -> list[tuple[str, int]]:
        return heapq.nlargest(n, self.counts.items(), key=lambda kv: kv[1])
