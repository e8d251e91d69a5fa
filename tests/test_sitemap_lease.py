"""A site's first sitemap file, fetched on the lease of the page whose robots.txt named it, and
answered with a redirect: the redirect is followed the usual way, under the target's rules.

The file on the lease is checked against the robots.txt just read and sent without its own
robots check (``dont_obey_robotstxt``) and without following redirects: a redirect's target
may be on a site whose rules are not in hand. The target is read in its turn, as any other
file, so the pages only it lists are still crawled, and a target robots.txt forbids is not
fetched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls: not in make test-fast

HOSTS = {"a.test": "127.0.11.1", "b.test": "127.0.11.2"}


def _sitemap(*urls: str) -> dict[str, object]:
    locs = "".join(f"<url><loc>{u}</loc></url>" for u in urls)
    xmlns = "http://www.sitemaps.org/schemas/sitemap/0.9"
    return {"status": 200, "body": f'<?xml version="1.0"?><urlset xmlns="{xmlns}">{locs}</urlset>'}


def test_a_redirected_first_sitemap_is_followed_under_the_targets_rules(tmp_path: Path):
    port = "{port}"
    a, b = f"http://a.test:{port}", f"http://b.test:{port}"
    pages: dict[str, object] = {
        "//a.test/robots.txt": {"status": 200, "body": f"User-agent: *\nSitemap: {a}/old.xml\n"},
        "//a.test/old.xml": {"redirect": f"{a}/maps/real.xml", "status": 301},
        "//a.test/maps/real.xml": _sitemap(f"{a}/only.html"),
        # a second site whose sitemap moved to a place its robots.txt forbids
        "//b.test/robots.txt": {
            "status": 200,
            "body": f"User-agent: *\nDisallow: /maps/\nSitemap: {b}/old.xml\n",
        },
        "//b.test/old.xml": {"redirect": f"{b}/maps/real.xml", "status": 301},
        "//b.test/maps/real.xml": _sitemap(f"{b}/only.html"),
        "/": {"links": []},
        "/only.html": {"links": []},
    }
    with RawWeb(tmp_path / "web", pages, HOSTS) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "urls=" + ",".join(web.url(h) for h in HOSTS),
            settings={"ROBOTSTXT_OBEY": True, "LARBIN_SITEMAPS": True, "DOWNLOAD_DELAY": 0},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    asked = {(e["host"], e["path"]) for e in crawl.requests}
    order = [e["path"] for e in crawl.requests if e["host"] == "a.test"]
    # a.test: its first file right after robots.txt, before the page; the redirect followed
    assert order[:3] == ["/robots.txt", "/old.xml", "/"], order
    assert ("a.test", "/maps/real.xml") in asked and ("a.test", "/only.html") in asked
    # b.test: the redirect leads where its robots.txt forbids: not fetched, nor what it lists
    assert ("b.test", "/old.xml") in asked
    assert ("b.test", "/maps/real.xml") not in asked and ("b.test", "/only.html") not in asked
    assert crawl.stats["larbin/sitemaps/on_lease"] == 2
