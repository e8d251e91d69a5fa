"""Memory of the robots.txt rules kept per site: bytes and objects the cyclic collector tracks.

``python -m benchmarks.bench_robots_memory [--sites N]``: N sites' state built as the robots
middleware keeps it, with the same robots.txt body each (a * group, two other groups, a
Sitemap line), before (protego's parser object and a slotted dataclass per site) and now
(one plain tuple: ``SiteRules``' fields and ``compile_rules``' tuple of str). Bytes from
tracemalloc, tracked objects from ``gc.get_objects()`` after a full collection (which
untracks tuples of atoms), both per site.
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.robotstxt import ProtegoRobotParser

from larbinscrapy.politeness.robotsrules import PARSE, SiteRules
from larbinscrapy.politeness.robotstxt import compile_rules

if TYPE_CHECKING:
    from collections.abc import Callable

BODY = (
    b"User-agent: *\nDisallow: /cgi-bin/\nDisallow: /search\nAllow: /search/about\n"
    b"Disallow: /*.pdf$\nCrawl-delay: 2\n\nUser-agent: otherbot\nDisallow: /\n\n"
    b"User-agent: mediabot\nDisallow: /private/\nAllow: /\n"
    b"Sitemap: https://h.test/sitemap.xml\n"
)


@dataclass(frozen=True, slots=True)
class _OldRules:  # robotsrules.SiteRules before (issue #35)
    verdict: str
    expires: float
    errors: int = 0
    failing_since: float | None = None


def _before(i: int) -> Any:
    parser = ProtegoRobotParser(BODY, None)
    parser.allowed("http://h.test/x", "larbinscrapy")  # protego memoises the group it matched
    return (_OldRules(PARSE, 1000.0 + i), parser)


def _now(i: int) -> Any:
    return (*SiteRules(PARSE, 1000.0 + i), compile_rules(BODY, "larbinscrapy")[0])


def measure(build: Callable[[int], Any], sites: int) -> tuple[float, float]:
    """(bytes, tracked objects) per site of ``sites`` entries built by ``build``."""
    gc.collect()
    tracked = len(gc.get_objects())
    tracemalloc.start()
    kept = {f"http://h{i}.test": build(i) for i in range(sites)}
    gc.collect()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    tracked = len(gc.get_objects()) - tracked
    assert len(kept) == sites
    return size / sites, tracked / sites


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sites", type=int, default=20000)
    args = ap.parse_args()
    for name, build in (("before (protego object)", _before), ("now (tuple of str)", _now)):
        size, tracked = measure(build, args.sites)
        print(f"{name}: {size:,.0f} bytes/site, {tracked:.2f} GC-tracked objects/site")


if __name__ == "__main__":
    main()
