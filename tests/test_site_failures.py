"""Failures cost what failed: broken URLs of a site do not hold back its good pages.

A site whose "calendar" URLs close the connection without answering, between good pages that
answer at once (``testweb.rawweb``): each broken URL is that URL's failure (retried once, then
dropped), and the IP backs off only when most of its recent answers fail
(``LARBIN_IP_FAILURE_WINDOW``, ``LARBIN_IP_FAILURE_RATE``; ``politeness.ipsites.IpTable``).
"""

from __future__ import annotations

import time

import pytest

from larbinscrapy.politeness import failures
from tests.support.cores import ip_table
from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

HOST_IP = "127.0.5.21"
GOOD = tuple(f"/good{i}.html" for i in range(60))
BROKEN = tuple(f"/calendar{i}.html" for i in range(30))
DELAY = 0.15


def _site(with_broken: bool) -> dict[str, dict]:
    """An index linking the good pages, with a broken URL after every second one."""
    links: list[str] = []
    for i, good in enumerate(GOOD):
        links.append(good)
        if with_broken and i % 2:
            links.append(BROKEN[i // 2])
    pages: dict[str, dict] = {"/index.html": {"links": links}}
    pages.update({p: {"links": ["/index.html"]} for p in GOOD})
    pages.update({p: {"behaviour": "close"} for p in BROKEN})
    return pages


def _timed_crawl(tmp_path, name: str, with_broken: bool):
    with RawWeb(tmp_path / name, _site(with_broken), {"h.test": HOST_IP}) as web:
        started = time.monotonic()
        crawl = run_crawl(
            web,
            tmp_path / f"{name}-out",
            "-a",
            "depth=2",
            "-a",
            "urls=" + web.url("h.test", "/index.html"),
            settings={"DOWNLOAD_DELAY": DELAY},
            timeout=240,
        )
        took = time.monotonic() - started
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    return crawl, took


@pytest.mark.crawl
def test_broken_urls_cost_themselves_not_the_site(tmp_path):
    good_only, good_took = _timed_crawl(tmp_path, "good", with_broken=False)
    mixed, mixed_took = _timed_crawl(tmp_path, "mixed", with_broken=True)
    want = {f"h.test{p}" for p in ("/index.html", *GOOD)}
    for crawl in (good_only, mixed):
        assert {
            i["url"].replace(f":{i['url'].split(':')[2].split('/')[0]}", "").removeprefix("http://")
            for i in crawl.items
        } == want
    tries = [e["path"] for e in mixed.requests]
    assert {p: tries.count(p) for p in BROKEN} == dict.fromkeys(BROKEN, 2)  # tried, retried
    assert mixed.stats["larbin/dropped/malformed"] == len(BROKEN)
    assert "larbin/ip/dropped" not in mixed.stats
    print(f"60 good pages: {good_took:.1f} s; with 30 unanswered URLs: {mixed_took:.1f} s")
    assert mixed_took < 3 * good_took, (mixed_took, good_took)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("outcomes", "backs_off"),
    [
        # one URL failure among answers: the normal delay
        ([False] * 5 + [failures.MALFORMED], False),
        # a third of the recent answers fail, in any order: still the normal delay
        ([False, False, failures.RESET] * 10, False),
        ([failures.TIMEOUT] * 10 + [False] * 10 + [failures.MALFORMED], False),
        # more than half of the last 20 fail: back off as before
        ([False] * 9 + [failures.MALFORMED] * 11, True),
        ([failures.RESET, False] * 5 + [failures.RESET] * 6, True),
        # the window moves on: old failures are forgotten
        ([failures.RESET] * 11 + [False] * 19 + [failures.RESET], False),
    ],
)
def test_url_failures_back_off_only_at_a_high_recent_rate(outcomes, backs_off):
    table = ip_table(0.5, clock=_Clock(), backoff=10.0, failure_window=20, failure_rate=0.5)
    st = table.get("127.0.5.22")
    for outcome in outcomes:
        table.finish(st, release=False, failed=outcome)
    assert (table.delay(st) > 0.5) == backs_off


def test_gone_failures_of_an_ip_that_answered_still_back_off():
    table = ip_table(0.5, clock=_Clock(), backoff=10.0, failure_window=20, failure_rate=0.5)
    st = table.get("127.0.5.23")
    for outcome in [False] * 10 + [failures.REFUSED]:
        table.finish(st, release=False, failed=outcome)
    assert table.delay(st) == 10.5


def test_retries_stay_out_of_the_recent_rate():
    # the site's last URLs are all retries of broken ones: they cost their URLs, not a back-off
    table = ip_table(0.5, clock=_Clock(), backoff=10.0, failure_window=20, failure_rate=0.5)
    st = table.get("127.0.5.24")
    for outcome in [False, False, failures.MALFORMED] * 7:
        table.finish(st, release=False, failed=outcome)
    for _ in range(15):
        table.finish(st, release=False, failed=failures.MALFORMED, retry=True)
        assert table.delay(st) == 0.5
    for _ in range(7):  # new URLs failing again: the rate climbs, the back-off returns
        table.finish(st, release=False, failed=failures.MALFORMED)
    assert table.delay(st) > 0.5
