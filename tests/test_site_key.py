"""One site, one key: a site on its scheme's default port (``http://h`` = ``http://h:80``,
``https://h`` = ``https://h:443``) has its robots.txt fetched once, counted at the server.

The sitemap reader names a site ``scheme://host:port`` (``urls.site_of``) and asks for
``https://h:443/sitemap.xml``; the seeds are ``https://h/``: a robots middleware keyed by netloc
saw two sites there and fetched robots.txt twice. nginx (``benchmarks.synthweb``) serves the web
on port 80, and with TLS on 443, of its own loopback addresses (the test runs as root).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.parse.urls import site_of, site_origin
from tests.support.synthweb import crawl_synthweb
from testweb.synthweb import SynthWeb

pytestmark = pytest.mark.crawl  # nginx and crawls: not in make test-fast

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(("tls", "port"), [(False, 80), (True, 443)])
def test_robots_once_per_site_on_default_port(tmp_path: Path, tls: bool, port: int) -> None:
    with SynthWeb(
        hosts=2,
        pages_per_host=8,
        dead=0,
        port=port,
        tls=tls,
        net="127.0.44",
        workdir=str(tmp_path / "web"),
    ) as web:
        assert all(":" not in seed.split("//")[1] for seed in web.seeds)  # no port in the seeds
        stats = crawl_synthweb(web, tmp_path / "out", {})
        entries = web.access_log_entries()
        fetched = {web.entry_url(e) for e in entries if e.status == 200}
    robots = Counter(e.host for e in entries if e.uri == "/robots.txt")
    assert robots == dict.fromkeys(web.hostnames, 1), robots
    sitemaps = Counter(e.host for e in entries if e.uri == "/sitemap.xml")
    assert sitemaps == dict.fromkeys(web.hostnames, 1), sitemaps
    assert fetched >= web.pages
    assert stats.get("robotstxt/request_count") == len(web.hostnames)


ORIGINS = [
    ("https://a.com:443", "https://a.com"),
    ("http://a.com:80", "http://a.com"),
    ("http://a.com:443", "http://a.com:443"),
    ("https://a.com:8443", "https://a.com:8443"),
    ("http://[::1]:80", "http://[::1]"),
    ("http://[::1]:8080", "http://[::1]:8080"),
]


@pytest.mark.parametrize(("site", "origin"), ORIGINS)
def test_site_origin_leaves_out_the_default_port(site: str, origin: str) -> None:
    assert site_origin(site) == origin
    assert site_of(origin + "/robots.txt") == site
