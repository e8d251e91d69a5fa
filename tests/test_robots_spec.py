"""robots.txt as RFC 9309 and Google's parser read it (issue #34, point 2).

The group that applies is chosen by the crawler's product token, not by any word of the
``User-Agent`` header; a robots.txt that answers 429 for ever holds a one-pass crawl only
``LARBIN_ROBOTS_RETRY_MAX`` seconds, then the site is disallowed with a counted reason.
"""

from __future__ import annotations

import gc

import pytest
from scrapy.settings import Settings

from larbinscrapy.conf.defaults import USER_AGENT
from larbinscrapy.politeness.robotsrules import DAY, DISALLOW_ALL, PARSE, RobotsPolicy, SiteRules
from larbinscrapy.politeness.robotstxt import RobotsTxtParser, compile_rules, token_of
from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

DEFAULT_AGENT = USER_AGENT


def _fetched(crawl, host: str) -> list[str]:
    return [e["path"] for e in crawl.requests if e["host"] == host]


@pytest.mark.crawl
def test_a_robots_txt_throttled_for_ever_does_not_hold_the_crawl(tmp_path):
    # t429.test's robots.txt answers 429 for ever; ok.test is an ordinary site. Today the crawl
    # asks t429.test's robots.txt again after every pause (60 s doubling) and never ends.
    pages: dict[str, dict] = {f"/p{i}.html": {"links": []} for i in range(3)}
    pages["//t429.test/robots.txt"] = {"status": 429, "body": "slow down"}
    # the default USER_AGENT's URL names github: that group is not ours (product token only)
    pages["//gh.test/robots.txt"] = {"body": "User-agent: github\nDisallow: /\n"}
    # an unknown line between two User-agent lines does not split their group (RFC 9309)
    pages["//split.test/robots.txt"] = {
        "body": "User-agent: LarbinScrapy\nX-Unknown: 1\nUser-agent: otherbot\nDisallow: /p1.html\n"
    }
    hosts = {
        "ok.test": "127.29.1.1",
        "t429.test": "127.29.1.2",
        "gh.test": "127.29.1.3",
        "split.test": "127.29.1.4",
    }
    with RawWeb(tmp_path / "web", pages, hosts) as web:
        urls = [web.url(h, p) for h in hosts for p in pages if not p.startswith("//")]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            "urls=" + ",".join(urls),
            settings={
                "DOWNLOAD_DELAY": 0.2,
                "LARBIN_SITEMAPS": False,
                "LARBIN_THROTTLE_BACKOFF": 0.5,
                "LARBIN_ROBOTS_RETRY_MAX": 3,
            },
            timeout=90,
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    assert sorted(_fetched(crawl, "ok.test")) == ["/p0.html", "/p1.html", "/p2.html", "/robots.txt"]
    assert set(_fetched(crawl, "t429.test")) == {"/robots.txt"}
    assert sorted(_fetched(crawl, "gh.test")) == sorted(_fetched(crawl, "ok.test"))
    assert sorted(_fetched(crawl, "split.test")) == ["/p0.html", "/p2.html", "/robots.txt"]
    assert crawl.stats["larbin/robots/gave_up"] == 1


def test_the_default_user_agent_is_matched_by_its_product_token_only():
    settings = Settings({"USER_AGENT": DEFAULT_AGENT})
    assert token_of(settings) == "larbinscrapy"
    body = b"User-agent: github\nDisallow: /\n\nUser-agent: https\nDisallow: /\n"
    assert RobotsTxtParser(body, token_of(settings)).allowed("http://h.test/p.html")
    settings = Settings({"USER_AGENT": DEFAULT_AGENT, "ROBOTSTXT_USER_AGENT": "GitHub"})
    assert not RobotsTxtParser(body, token_of(settings)).allowed("http://h.test/p.html")


def test_a_sites_rules_are_not_an_object_graph():
    rules, delay, sitemaps = compile_rules(
        b"User-agent: *\nDisallow: /a\nAllow: /a/b\nCrawl-delay: 2\nSitemap: http://h.test/s\n",
        "larbinscrapy",
    )
    entry = (*SiteRules(PARSE, 5.0), rules)
    gc.collect()
    assert not gc.is_tracked(entry) and not gc.is_tracked(rules)
    assert (rules, delay, sitemaps) == (("A/a/b", "D/a"), 2.0, ("http://h.test/s",))


@pytest.mark.parametrize(
    ("started", "now", "wait", "gives_up"),
    [
        (0.0, 10.0, 0.0, False),
        (0.0, 10.0, 60.0, False),
        (0.0, 10.0, 300.0, True),
        (0.0, 301.0, 0.0, True),
        (100.0, 390.0, 5.0, False),
    ],
)
def test_a_throttled_robots_txt_is_given_up_past_the_bound(started, now, wait, gives_up):
    policy = RobotsPolicy(ttl=DAY, retry=60.0, unavailable_after=30 * DAY, retry_max=300.0)
    assert policy.give_up(started, now, wait) is gives_up
    rules = policy.gave_up(now)
    assert (rules.verdict, rules.expires) == (DISALLOW_ALL, now + DAY)
