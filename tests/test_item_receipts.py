"""Items survive ``kill -9`` (issue 26, finding 1): a page is acknowledged to the frontier only
once its item reached the OS, so a crawl killed several times and resumed has one item for every
page, none missing, and a page's item twice only where the server served that page twice (it
was in flight at a kill).

The kill moments are drawn at random (a fixed seed per case) from the server's request count,
so they fall anywhere in the crawl whatever the machine's load. Also: the receipts' bookkeeping
with a pipeline that holds items (the SQLite example), on real Scrapy signals.
"""

from __future__ import annotations

import json
import random
import signal
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from larbinscrapy import meta as M
from larbinscrapy.frontier.pending import PendingPages
from larbinscrapy.pipelines.contentdup import content_hash
from larbinscrapy.pipelines.receipts import ItemReceipts
from larbinscrapy.pipelines.sqlite_example import SQLitePipeline
from tests.support.crawl import LARBIN_DEFAULTS, run_crawl, seeds_args
from tests.support.resume import run_until

if TYPE_CHECKING:
    from pathlib import Path


DELAY = 0.05


def items_of(out: Path) -> list[str]:
    """The URLs of the items a run left in its feed (a torn last line is not an item)."""
    path = out / "items.jsonl"
    if not path.exists():
        return []
    urls = []
    for line in path.read_bytes().splitlines():
        try:
            urls.append(json.loads(line)["url"])
        except ValueError:
            continue  # a line the kill cut: its page was not acknowledged either
    return urls


@pytest.mark.crawl
@pytest.mark.parametrize("seed", [1, 2])
def test_items_survive_kill9_at_random_moments(web, tmp_path, seed):
    settings = {"DOWNLOAD_DELAY": DELAY}
    reference = run_crawl(web, tmp_path / "reference", *seeds_args(web.seeds), settings=settings)
    assert reference.returncode == 0, reference.stderr[-3000:]
    expected = Counter(item["url"] for item in reference.items)
    assert expected and max(expected.values()) == 1
    pages = sum(reference.fetch_counts(web.port).values())

    rng = random.Random(seed)
    job = {**settings, "JOBDIR": str(tmp_path / "job")}
    items: Counter[str] = Counter()
    log: list[dict] = []
    for run in range(3):  # three kills, each after a random share of what is left
        out = tmp_path / f"killed{run}"
        log += run_until(
            web, out, job, rng.randint(10, max(11, pages // 4)), signal.SIGKILL
        ).requests
        items.update(items_of(out))
    last = run_crawl(web, tmp_path / "last", *seeds_args(web.seeds), settings=job)
    assert last.returncode == 0, last.stderr[-3000:]
    assert last.stats["finish_reason"] == "finished"
    items.update(items_of(tmp_path / "last"))
    served = Counter(f"http://{e['host']}:{web.port}{e['path']}" for e in log + last.requests)

    # pages that serve the same bytes are one item, whichever of them comes first
    body = {url: content_hash(page.body) or url for url, page in web.web.pages.items()}
    kept = Counter(body.get(url, url) for url in items)  # items per content
    missing = {body.get(url, url) for url in expected} - set(kept)
    lost = sorted(url for url in expected if body.get(url, url) in missing)
    assert not missing, f"{len(missing)} items lost by the kills: {lost[:5]}"
    assert set(kept) == {body.get(url, url) for url in expected}
    copies = {k: sorted(u for u in items if body.get(u, u) == k) for k in kept}
    assert {k: urls for k, urls in copies.items() if len(urls) > 1} == {}, "stored twice"
    twice = {url for url, n in items.items() if n > 1}
    # an item twice only for a page in flight at a kill: the server served it again
    assert {url for url in twice if served[url] < 2} == set(), twice
    assert max(items.values()) <= 2


# -- the bookkeeping, on real signals ---------------------------------------------------------
class _Page:
    """A Response's part that the receipts read: its request's frontier record."""

    def __init__(self, rid: int) -> None:
        self.request = type("Req", (), {"meta": {M.RID: rid}})()


def _receipts(tmp_path: Path) -> tuple[ItemReceipts, list[int], object]:
    crawler = get_crawler(settings_dict={**LARBIN_DEFAULTS})
    receipts = ItemReceipts.from_crawler(crawler)
    done: list[int] = []
    receipts.connect(PendingPages(done.append))
    crawler.signals.send_catch_log(signals.spider_opened)  # the receipts take item_scraped then
    return receipts, done, crawler


def test_a_page_waits_for_its_items_and_a_held_row_for_its_commit(tmp_path):
    receipts, done, crawler = _receipts(tmp_path)
    pending = receipts.pages
    assert isinstance(pending, PendingPages)
    db = SQLitePipeline(str(tmp_path / "pages.db"), batch_size=2, receipts=receipts)
    db.open_spider()
    first, second = {"url": "http://a.test/1"}, {"url": "http://a.test/2"}
    pending.page_done(1, 1)  # page 1: one item; page 2: one item
    pending.page_done(2, 1)
    db.process_item(first)  # held: the batch of 2 is not full
    crawler.signals.send_catch_log(signals.item_scraped, item=first, response=_Page(1))
    receipts.settle()  # the feed is flushed, but the row is not committed
    assert done == []
    db.process_item(second)  # fills the batch: both rows committed
    crawler.signals.send_catch_log(signals.item_scraped, item=second, response=_Page(2))
    assert done == [1]
    receipts.settle()
    assert done == [1, 2]
    db.close_spider()


def test_dropped_items_settle_at_once(tmp_path):
    receipts, done, crawler = _receipts(tmp_path)
    receipts.pages.page_done(7, 2)  # type: ignore[union-attr]
    for url in ("http://a.test/x", "http://a.test/y"):
        crawler.signals.send_catch_log(
            signals.item_dropped, item={"url": url}, response=_Page(7), exception=DropItem("dup")
        )
    assert done == [7]
