"""``Turns``: sitemap files wait for their IP before the downloader, one per IP, a few in all."""

from __future__ import annotations

import asyncio
import gc
from typing import TYPE_CHECKING

import pytest
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.test import get_crawler

from larbinscrapy.seeds.sitemaps import SitemapReader
from larbinscrapy.seeds.turns import Turns
from tests.support.crawl import LARBIN_DEFAULTS
from tests.support.http1 import run
from tests.support.http1 import settle as reactor_turn

if TYPE_CHECKING:
    from collections.abc import Callable


def test_one_turn_per_ip_and_at_most_so_many_in_all():
    turns = Turns(2)
    got: list[str] = []
    for key, name in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1"), ("a", "a3")):
        turns.take(key).addCallback(lambda _, n=name: got.append(n))
    assert got == ["a1", "b1"] and turns.running == 2  # a2 waits for a, c1 for room
    assert turns.waiting == 3
    turns.give("b")  # room: the first key that became free with a waiter (c)
    assert got == ["a1", "b1", "c1"]
    turns.give("a")  # a's next, in arrival order
    assert got == ["a1", "b1", "c1", "a2"]
    turns.give("c")
    turns.give("a")
    assert got == ["a1", "b1", "c1", "a2", "a3"] and turns.running == 1
    turns.give("a")
    assert turns.running == 0 and turns.waiting == 0
    turns.take("a").addCallback(lambda _: got.append("a4"))  # nothing held: at once
    assert got[-1] == "a4"


def test_an_ip_with_several_connections_has_as_many_turns():
    """``LARBIN_IP_CONNECTIONS`` 2: two of a shared address's sitemap files at once (one at a
    time held the end of a broad crawl to one file an address), still ``most`` in all."""
    turns = Turns(3, per_key=2)
    got: list[str] = []
    for key, name in (("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1")):
        turns.take(key).addCallback(lambda _, n=name: got.append(n))
    assert got == ["a1", "a2", "b1"] and turns.running == 3  # a3 waits for a, c1 for room
    turns.give("a")  # room, and a has a free turn: c became ready first
    assert got == ["a1", "a2", "b1", "c1"]
    turns.give("b")
    assert got == ["a1", "a2", "b1", "c1", "a3"] and turns.running == 3
    for key in ("a", "a", "c"):
        turns.give(key)
    assert turns.running == 0 and turns.waiting == 0
    one = Turns(3)  # the default: one a key
    for name in ("x1", "x2"):
        one.take("x").addCallback(lambda _, n=name: got.append(n))
    assert got[-1] == "x1" and one.running == 1 and one.waiting == 1


def test_sites_waiting_for_their_sitemap_turn_cost_no_coroutine():
    """A broad crawl starts sites faster than their sitemap files get a turn: thousands wait
    behind busy IPs at once. Each waits as a few bytes, not a suspended chain of coroutines
    and futures that every pass of the cyclic collector walks (issue 35, point 3; figures in
    benchmarks/RESULTS.md), and none is forgotten: each is read in its turn, and the crawl
    stays open while any waits."""
    crawler = get_crawler(settings_dict={**LARBIN_DEFAULTS, "LARBIN_SITEMAPS": True})
    reader = SitemapReader.from_crawler(crawler)
    reader._turns = Turns(1)
    fetched: list[str] = []
    first = asyncio.get_event_loop().create_future()  # the first file's answer, held

    async def download(url: str) -> None:  # the engine's download: the server is slow
        fetched.append(url)
        if len(fetched) == 1:
            await first

    reader._download = download  # type: ignore[method-assign]
    sites = [f"http://h{n}.test" for n in range(5000)]
    gc.collect()
    before = len(gc.get_objects())
    for site in sites:
        reader._start(site, [])
    reactor_turn()
    gc.collect()
    per_site = (len(gc.get_objects()) - before) / len(sites)
    assert fetched == ["http://h0.test/sitemap.xml"]
    assert per_site < 4, per_site
    with pytest.raises(DontCloseSpider):
        reader._spider_idle()
    first.set_result(None)  # the first answer comes: every other site gets its turn, in order
    run(_until(lambda: len(fetched) == len(sites)))
    assert fetched == [f"{site}/sitemap.xml" for site in sites]
    reactor_turn()
    assert reader._turns.waiting == 0 and reader._turns.running == 0
    reader._spider_idle()


async def _until(done: Callable[[], bool]) -> None:
    while not done():
        await asyncio.sleep(0)


def test_a_site_waiting_for_its_sitemap_turn_costs_a_few_bytes():
    """With one page a host, a broad crawl starts sites much faster than their sitemap files
    get a turn, and hundreds of thousands wait: each waits as its name and its turn's key, not
    a function object, its arguments and a sitemap URL made before they are needed."""
    import tracemalloc

    class Resolved:
        """The crawl's politeness as the reader asks it: a host's IP, 100 names an address."""

        def cached_ip(self, host: str) -> str:
            number = host.split(".", maxsplit=1)[0][1:]
            return f"10.0.{int(number) // 100 // 256}.{int(number) // 100 % 256}"

    crawler = get_crawler(settings_dict={**LARBIN_DEFAULTS, "LARBIN_SITEMAPS": True})
    reader = SitemapReader.from_crawler(crawler)
    reader._turns = Turns(1)
    reader._politeness = Resolved()  # type: ignore[assignment]
    held = asyncio.get_event_loop().create_future()

    async def download(url: str) -> None:  # the first file's answer never comes
        await held

    reader._download = download  # type: ignore[method-assign]
    sites = [f"http://h{n}.test:80" for n in range(5000)]
    reader._start("http://h999999.test:80", [])  # holds the only turn
    reactor_turn()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for site in sites:
            reader._start(site, [])
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    ours = [tracemalloc.Filter(True, "*/larbinscrapy/*")]
    held_bytes = sum(
        s.size_diff
        for s in after.filter_traces(ours).compare_to(before.filter_traces(ours), "filename")
    )
    assert reader._turns.waiting == len(sites)
    assert held_bytes / len(sites) < 150, f"{held_bytes / len(sites):.0f} bytes a waiting site"
    # the answer comes: each waiting site is read in its turn, and nothing is left running
    # (a cancelled stand-in left its reads to fail later, in another test of this worker)
    held.set_result(None)
    run(_until(lambda: reader._turns.waiting == 0 and reader._turns.running == 0))
