"""The gate's core (``larbinscrapy.gate.admission``): the order of larbin's ``check()``.

A link refused by the URL filters never reaches the seen-set (it may come back from a page
where it is allowed); a seen link never spends a trap budget; only then is a Request built.
Built here without a crawler: a plain set is the seen-set, Scrapy's stats collector counts.
"""

from __future__ import annotations

import pytest
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from larbinscrapy import meta as M
from larbinscrapy.gate.admission import Admission, LinkSource
from larbinscrapy.gate.seencache import SeenLinks
from larbinscrapy.gate.traps import TrapGuard
from larbinscrapy.gate.urlfilter import UrlFilter
from larbinscrapy.parse.urls import fingerprint_url
from settings import base

PAGE = LinkSource("http://h.test/dir/page.html", depth=1, site_depth=1, parent="rid-1")


class SetSeen:
    """A seen-set as small as can be: the fingerprints marked, in a set."""

    def __init__(self) -> None:
        self.marked: set[bytes] = set()

    def seen_fingerprint(self, fp: bytes) -> bool:
        found = fp in self.marked
        self.marked.add(fp)
        return found


def admission(
    *, pages_per_site: int = 0, cache: int = 0, **settings: object
) -> tuple[Admission, SetSeen, MemoryStatsCollector]:
    values = {k: v for k, v in vars(base).items() if k.isupper()}
    url_filter = UrlFilter.from_settings(Settings({**values, **settings}))
    stats = MemoryStatsCollector(get_crawler())
    gate = Admission(url_filter, 0, stats, TrapGuard(pages_per_site, 0))
    seen = SetSeen()
    gate.connect(
        url_filter=None,
        links_seen=SeenLinks(seen.seen_fingerprint, fingerprint_url, cache),
        count_seen=lambda n: stats.inc_value("seen", n),
        errback=None,
        referer=None,
    )
    return gate, seen, stats


@pytest.mark.parametrize("cache", [0, 4])
def test_a_filtered_link_is_not_marked_seen(cache):
    gate, seen, stats = admission(cache=cache, LARBIN_EXTERNAL=False)
    outside = "http://o.test/a.html"
    assert list(gate.admit(PAGE, [outside])) == []
    assert stats.get_value("larbin/filtered/external") == 1
    assert fingerprint_url(outside) not in seen.marked  # o.test's own pages may still link it
    other = LinkSource("http://o.test/", depth=0, site_depth=0)
    assert [r.url for r in gate.admit(other, [outside])] == [outside]


def test_a_seen_link_spends_no_trap_budget():
    gate, _, stats = admission(pages_per_site=2)
    first = [r.url for r in gate.admit(PAGE, ["http://h.test/a.html", "http://h.test/a.html"])]
    assert first == ["http://h.test/a.html"]
    assert stats.get_value("seen") == 1
    # one of the site's two URLs is spent: the second new one passes, the third is refused
    later = [r.url for r in gate.admit(PAGE, ["http://h.test/b.html", "http://h.test/c.html"])]
    assert later == ["http://h.test/b.html"]
    assert stats.get_value("larbin/filtered/site_budget") == 1


def test_an_admitted_link_is_a_request_with_the_pages_meta():
    gate, _, _ = admission()
    (request,) = gate.admit(PAGE, ["http://h.test/dir/b.html"])
    assert request.meta[M.ADMITTED] == "http://h.test/dir/b.html"
    assert request.meta[M.PARENT] == "rid-1"
    assert request.meta["depth"] == 2
    assert request.meta[M.SITE_DEPTH] == 2
    assert request.meta[M.REFERER] == PAGE.url


def test_links_past_the_depth_limit_are_counted_and_never_tested():
    gate, seen, stats = admission()
    gate.depth_limit = 1
    assert list(gate.admit(PAGE, ["http://h.test/a.html", "http://h.test/b.html"])) == []
    assert stats.get_value("larbin/filtered/depth") == 2
    assert not seen.marked
