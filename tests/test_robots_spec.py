"""robots.txt as RFC 9309 and Google's parser read it (issue #34, point 2).

The group that applies is chosen by the crawler's product token, not by any word of the
``User-Agent`` header; a robots.txt that answers 429 for ever holds a one-pass crawl only
``LARBIN_ROBOTS_RETRY_MAX`` seconds, then the site is disallowed with a counted reason.
"""

from __future__ import annotations

import pytest

from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

RULES = "User-agent: *\nDisallow: /secret\n"


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
    pages["//split.test/robots.txt"] = {"body": "User-agent: LarbinScrapy\nX-Unknown: 1\n"
                                        "User-agent: otherbot\nDisallow: /p1.html\n"}
    hosts = {"ok.test": "127.29.1.1", "t429.test": "127.29.1.2", "gh.test": "127.29.1.3",
             "split.test": "127.29.1.4"}
    with RawWeb(tmp_path / "web", pages, hosts) as web:
        urls = [web.url(h, p) for h in hosts for p in pages if not p.startswith("//")]
        crawl = run_crawl(web, tmp_path / "out", "-a", "depth=0", "-a", "urls=" + ",".join(urls),
                          settings={"DOWNLOAD_DELAY": 0.2, "LARBIN_SITEMAPS": False,
                                    "LARBIN_THROTTLE_BACKOFF": 0.5,
                                    "LARBIN_ROBOTS_RETRY_MAX": 3},
                          timeout=90)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    assert sorted(_fetched(crawl, "ok.test")) == ["/p0.html", "/p1.html", "/p2.html",
                                                  "/robots.txt"]
    assert set(_fetched(crawl, "t429.test")) == {"/robots.txt"}
    assert sorted(_fetched(crawl, "gh.test")) == sorted(_fetched(crawl, "ok.test"))
    assert sorted(_fetched(crawl, "split.test")) == ["/p0.html", "/p2.html", "/robots.txt"]
    assert crawl.stats["larbin/robots/gave_up"] == 1
