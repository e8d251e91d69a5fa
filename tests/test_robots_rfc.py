"""robots.txt read as RFC 9309 says, against a raw-socket server (``testweb.rawweb``).

One crawl of sites whose robots.txt answers 500, 503, 404, 403, never answers, redirects 5 and
6 times, or is 600 KiB long; one crawl with a short ``LARBIN_ROBOTS_TTL``; one whose
robots.txt answers 503 while its URLs keep arriving (the back-off); and the pure rule
(``larbinscrapy.politeness.robotsrules``) as a table.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from larbinscrapy.politeness.robotsrules import (
    ALLOW_ALL,
    DAY,
    DISALLOW_ALL,
    PARSE,
    RobotsPolicy,
    SiteRules,
    verdict,
)
from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

RULES = "User-agent: *\nDisallow: /secret\n"
# each site on its own loopback IP, so no site waits on another's politeness
SITES = {
    "s500": "127.0.6.1",
    "s503": "127.0.6.2",
    "s404": "127.0.6.3",
    "s403": "127.0.6.4",
    "tarpit": "127.0.6.5",
    "r5": "127.0.6.6",
    "r6": "127.0.6.7",
    "big": "127.0.6.8",
}
PAGES = ("/p.html", "/secret")


def _redirects(host: str, hops: int) -> dict[str, dict]:
    chain = {f"//{host}/robots.txt": {"redirect": "/h1", "status": 301}}
    for i in range(1, hops):
        chain[f"//{host}/h{i}"] = {"redirect": f"/h{i + 1}", "status": 302}
    chain[f"//{host}/h{hops}"] = {"status": 200, "body": RULES}
    return chain


def _pages() -> dict[str, dict]:
    padding = "".join(
        f"# line {i:06d} of padding to push the rule past 500 KiB\n" for i in range(12000)
    )
    pages: dict[str, dict] = {p: {"links": []} for p in PAGES}
    pages.update(
        {
            "//s500.test/robots.txt": {"status": 500, "body": "oops"},
            "//s503.test/robots.txt": {"status": 503, "body": "down"},
            "//s404.test/robots.txt": {"status": 404, "body": RULES},
            "//s403.test/robots.txt": {"status": 403, "body": RULES},
            "//tarpit.test/robots.txt": {"behaviour": "tarpit"},
            "//big.test/robots.txt": {
                "status": 200,
                "body": "User-agent: *\n" + padding + "Disallow: /secret\n",
            },
            **_redirects("r5.test", 5),
            **_redirects("r6.test", 6),
        }
    )
    assert len(pages["//big.test/robots.txt"]["body"]) > 600 * 1024
    return pages


def _fetched(crawl, host: str) -> list[str]:
    return [e["path"] for e in crawl.requests if e["host"] == host]


@pytest.mark.crawl
def test_answers_read_as_rfc_9309_says(tmp_path):
    hosts = {f"{name}.test": ip for name, ip in SITES.items()}
    with RawWeb(tmp_path / "web", _pages(), hosts) as web:
        urls = [web.url(h, p) for h in hosts for p in PAGES]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            "urls=" + ",".join(urls),
            settings={"DOWNLOAD_TIMEOUT": 1, "LARBIN_IP_BACKOFF": 0.2, "LARBIN_SITEMAPS": False},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    # 5xx and unreachable: nothing of the site is fetched (robots.txt retried once by Scrapy)
    for host in ("s500.test", "s503.test", "tarpit.test"):
        assert set(_fetched(crawl, host)) == {"/robots.txt"}, (host, _fetched(crawl, host))
    assert crawl.stats["larbin/robots/unreachable"] >= 4  # the pages of s500 and s503
    # 4xx: everything allowed, even what the error page's text would disallow
    for host in ("s404.test", "s403.test"):
        assert sorted(_fetched(crawl, host)) == ["/p.html", "/robots.txt", "/secret"], host
    # five redirects are followed and the rules obeyed; robots.txt fetched once per site
    assert sorted(_fetched(crawl, "r5.test")) == sorted(
        ["/robots.txt", "/h1", "/h2", "/h3", "/h4", "/h5", "/p.html"]
    )
    # a sixth is not: robots.txt unavailable, everything allowed
    r6 = _fetched(crawl, "r6.test")
    assert "/h6" not in r6 and {"/p.html", "/secret"} <= set(r6), r6
    # 600 KiB: the rule at its end is read
    assert sorted(_fetched(crawl, "big.test")) == ["/p.html", "/robots.txt"]


@pytest.mark.crawl
def test_rules_expire_and_are_fetched_again_before_the_next_page(tmp_path):
    ttl, delay = 1.0, 0.6
    pages = {f"/p{i}.html": {"links": []} for i in range(6)}
    pages["/robots.txt"] = {"status": 200, "body": RULES}
    with RawWeb(tmp_path / "web", pages, {"ttl.test": "127.0.6.9"}) as web:
        urls = [web.url("ttl.test", p) for p in (*pages, "/secret") if p != "/robots.txt"]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            "urls=" + ",".join(urls),
            settings={"DOWNLOAD_DELAY": delay, "LARBIN_ROBOTS_TTL": ttl, "LARBIN_SITEMAPS": False},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    robots = [e["t"] for e in crawl.requests if e["path"] == "/robots.txt"]
    fetched = [e for e in crawl.requests if e["path"] != "/robots.txt"]
    assert {e["path"] for e in fetched} == {f"/p{i}.html" for i in range(6)}
    assert len(robots) >= 2
    for e in fetched:  # no page on rules older than the TTL (plus the wait for its delay)
        last = max(t for t in robots if t <= e["t"])
        assert e["t"] - last <= ttl + delay + 0.5, (e, robots)
    assert crawl.stats["larbin/robots/refetched"] == len(robots) - 1


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (200, PARSE),
        (204, PARSE),
        (404, ALLOW_ALL),
        (403, ALLOW_ALL),
        (401, ALLOW_ALL),
        (429, ALLOW_ALL),
        (301, ALLOW_ALL),
        (500, DISALLOW_ALL),
        (503, DISALLOW_ALL),
        (599, DISALLOW_ALL),
        (None, DISALLOW_ALL),
    ],
)
def test_verdict(status, expected):
    assert verdict(status) == expected


def test_unreachable_backs_off_then_is_taken_as_unavailable():
    policy = RobotsPolicy(ttl=DAY, retry=60.0, unavailable_after=30 * DAY)
    now, rules = 0.0, None
    waits = []
    for _ in range(5):
        rules = policy.answered(503, now, rules)
        assert rules.verdict == DISALLOW_ALL
        waits.append(rules.expires - now)
        now = rules.expires
    assert waits == [60.0, 120.0, 240.0, 480.0, 960.0]
    rules = SiteRules(DISALLOW_ALL, 29 * DAY, errors=40, failing_since=0.0)
    assert policy.answered(None, 29 * DAY, rules).verdict == DISALLOW_ALL
    assert policy.answered(None, 29 * DAY, rules).expires == 30 * DAY  # capped at the TTL
    late = policy.answered(None, 30 * DAY, rules)
    assert (late.verdict, late.expires) == (ALLOW_ALL, 31 * DAY)
    # an answer ends the outage: the next failure starts the back-off and the count again
    fine = policy.answered(200, 31 * DAY, late)
    assert (fine.verdict, fine.errors, fine.failing_since) == (PARSE, 0, None)
    again = policy.answered(500, 32 * DAY, fine)
    assert (again.errors, again.failing_since, again.expires) == (1, 32 * DAY, 32 * DAY + 60)


def test_rules_expire_after_the_ttl():
    policy = RobotsPolicy(ttl=100.0, retry=60.0, unavailable_after=30 * DAY)
    for status in (200, 404):
        rules = policy.answered(status, 5.0)
        assert not policy.expired(rules, 104.9)
        assert policy.expired(rules, 105.0)


@pytest.mark.crawl
def test_an_unreachable_robots_txt_is_asked_again_after_a_growing_back_off(tmp_path):
    # A chain of good pages on g.test links one new page of u.test each (u.test's robots.txt
    # answers 503): u.test's URLs keep arriving, and its robots.txt is asked again only once
    # the back-off since the last try has passed, doubling each time; none of its pages goes.
    retry, chain = 0.3, 10
    pages: dict[str, dict] = {
        f"/g{i}.html": {"links": [f"/g{i + 1}.html", f"http://u.test:{{port}}/u{i}.html"]}
        for i in range(chain)
    }
    pages["//u.test/robots.txt"] = {"status": 503, "body": "down"}
    hosts = {"g.test": "127.0.6.10", "u.test": "127.0.6.11"}
    with RawWeb(tmp_path / "web", pages, hosts) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=20",
            "-a",
            "urls=" + web.url("g.test", "/g0.html"),
            settings={
                "DOWNLOAD_DELAY": 0.4,
                "RETRY_TIMES": 0,
                "LARBIN_ROBOTS_RETRY": retry,
                "LARBIN_SITEMAPS": False,
            },
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert len(_fetched(crawl, "g.test")) == chain + 2  # its pages, a 404 and robots.txt
    tries = [e["t"] for e in crawl.requests if e["host"] == "u.test"]
    assert set(_fetched(crawl, "u.test")) == {"/robots.txt"}
    assert 3 <= len(tries) < chain, tries
    for k, (a, b) in enumerate(pairwise(tries)):
        assert b - a >= retry * 2**k - 0.05, (k, tries)
    assert crawl.stats["larbin/robots/unreachable"] == chain
