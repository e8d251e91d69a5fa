"""A robots.txt redirected to another host (a bare name to ``www``, the most common move on the
web) is read from that host, and a host that cannot be read leaves the site with no rules.

Found in the million-host run on the simulated internet (``benchmarks/RESULTS.md``, issue 35):
the redirect kept the first host's address for its politeness, and the ``www`` name was looked
up inside the download, on the clock of the host's first answer (``LARBIN_HOST_SILENT_TIMEOUT``).
The lookup waited behind others, the live host was set aside as silent, the try again was
dropped, and a dropped robots.txt read as "none": two pages its 503 forbade were fetched.
RFC 9309 section 2.3.1.4: a robots.txt unreachable for a server or network error means
complete disallow.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.crawl import Crawl, run_crawl
from tests.support.dnsserver import DnsServer, Name
from testweb.rawweb import RawWeb

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls: not in make test-fast

HOSTS = {
    "a.test": "127.0.7.1",  # the site the seeds name
    "www.a.test": "127.0.7.2",  # where its robots.txt moved: another server
    "b.test": "127.0.7.1",  # a site with no robots.txt (404): the crawl's control
}
PAGES_OF = ("/", "/open.html", "/private.html")
DNS_IP = "127.0.7.53"
SLOW_DNS = 2.0  # seconds the DNS server takes to answer for www.a.test
SILENT = 1  # LARBIN_HOST_SILENT_TIMEOUT: a host's first answer, its name already known


def _crawl(tmp_path: Path, www_robots: dict[str, Any]) -> Crawl:
    port = "{port}"
    pages: dict[str, Any] = {
        "//a.test/robots.txt": {"redirect": f"http://www.a.test:{port}/robots.txt", "status": 301},
        "//www.a.test/robots.txt": www_robots,
        "/": {"links": ["/open.html", "/private.html"]},
        "/open.html": {"links": []},
        "/private.html": {"links": []},
    }
    # www.a.test is looked up in DNS, slower than a host's first answer may take
    zone = {"www.a.test": Name(a=[HOSTS["www.a.test"]], delay=SLOW_DNS)}
    pinned = {name: ip for name, ip in HOSTS.items() if name != "www.a.test"}
    with RawWeb(tmp_path / "web", pages, HOSTS) as web, DnsServer(zone, ip=DNS_IP) as dns:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "urls=" + ",".join(web.url(h) for h in ("a.test", "b.test")),
            settings={
                "ROBOTSTXT_OBEY": True,
                "LARBIN_SITEMAPS": False,
                "LARBIN_HOST_SILENT_TIMEOUT": SILENT,
                "DOWNLOAD_TIMEOUT": 5,
                "LARBIN_RESOLVE": json.dumps(pinned),
                "LARBIN_DNS_SERVERS": dns.server,
            },
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    return crawl


def _asked(crawl: Crawl, host: str) -> list[tuple[str, str]]:
    """(address, path) of every request the server saw for ``host``."""
    return [(e["ip"], e["path"]) for e in crawl.requests if e["host"] == host]


def test_a_robots_txt_moved_to_a_host_whose_name_answers_slowly_is_read(tmp_path: Path):
    """``www.a.test`` is another server, and its name takes longer to look up than a host's
    first answer may take: the lookup is not on that clock. Its robots.txt is asked of its own
    address, its rules hold for ``a.test``, whose robots.txt moved there, and the host is not
    set aside as silent."""
    crawl = _crawl(tmp_path, {"status": 200, "body": "User-agent: *\nDisallow: /private.html\n"})
    assert _asked(crawl, "www.a.test") == [(HOSTS["www.a.test"], "/robots.txt")]
    a_pages = {path for _, path in _asked(crawl, "a.test")}
    assert a_pages == {"/robots.txt", "/", "/open.html"}, a_pages
    assert {p for _, p in _asked(crawl, "b.test")} == {"/robots.txt", *PAGES_OF}
    assert "larbin/host/silent" not in crawl.stats, crawl.stats


def test_a_robots_txt_moved_to_a_host_that_never_answers_allows_nothing(tmp_path: Path):
    """The ``www`` server accepts and never answers: ``a.test``'s robots.txt is unreachable,
    so none of its pages is fetched (RFC 9309: complete disallow), and the crawl ends."""
    crawl = _crawl(tmp_path, {"behaviour": "tarpit"})
    assert {p for _, p in _asked(crawl, "a.test")} == {"/robots.txt"}
    assert {ip for ip, _ in _asked(crawl, "www.a.test")} == {HOSTS["www.a.test"]}
    assert crawl.stats.get("larbin/robots/unreachable", 0) >= 1, crawl.stats
    assert {p for _, p in _asked(crawl, "b.test")} == {"/robots.txt", *PAGES_OF}
