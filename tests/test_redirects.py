"""A redirect's target passes the same rules as a link: URL filters and the SSRF guard.

A raw-socket server (``testweb.rawweb``) answers each seed with a 302 to one forbidden target.
The proof that nothing forbidden was requested is at the server: its request log, and a second
listener on a loopback address outside ``LARBIN_ALLOWED_NETWORKS`` that must see no request.
Addresses outside 127.0.0.0/8 (169.254.169.254, 10.0.0.1) are only ever named, never reached:
the guard refuses them before any connection.
"""

from __future__ import annotations

import pytest

from tests.support.crawl import run_crawl
from testweb.rawweb import RawWeb

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

HOST_IP = "127.0.5.1"
OUTSIDE_IP = "127.0.6.1"  # loopback, but outside the crawl's allowed networks


def test_redirect_targets_are_filtered_like_links(tmp_path):
    hosts = {
        "h.test": HOST_IP,
        "other.test": HOST_IP,
        "h.example": HOST_IP,
        "inside.test": OUTSIDE_IP,
    }
    port = "{port}"  # the server's own port, filled in by the server
    base = f"http://h.test:{port}"
    targets = {
        "extension": f"{base}/report.pdf",
        "domain": f"http://h.example:{port}/",
        "external": f"http://other.test:{port}/",
        "length": f"{base}/{'a' * 600}.html",
        "cgi": f"{base}/search.html?q=1",
        "ssrf-loopback": f"http://{OUTSIDE_IP}:{port}/secret.html",
        "ssrf-name": f"http://inside.test:{port}/secret.html",
        "ssrf-metadata": "http://169.254.169.254/latest/meta-data/",
        "ssrf-private": "http://10.0.0.1/admin.html",
    }
    pages: dict[str, dict] = {f"/{name}.html": {"redirect": url} for name, url in targets.items()}
    pages["/ok.html"] = {"redirect": f"{base}/target.html"}  # allowed: followed
    pages["/target.html"] = {"links": []}
    # a seed moved to another host is followed even with external=false (the user's choice)
    pages["/moved.html"] = {"redirect": f"http://other.test:{port}/new-home.html"}
    pages["/new-home.html"] = {"links": []}
    # the SSRF cases are seeds, whose redirects pass no link filter: only the guard stops them
    ssrf = [p for p in pages if p.startswith("/ssrf-")]
    linked = [
        p
        for p in pages
        if p not in ("/target.html", "/moved.html", "/new-home.html") and p not in ssrf
    ]
    pages["/"] = {"links": linked}
    with RawWeb(tmp_path / "web", pages, hosts) as web:
        seeds = [web.url("h.test", p) for p in ("/", "/moved.html", *ssrf)]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=3",
            "-a",
            "external=false",
            "-a",
            "domains=test",
            "-a",
            "urls=" + ",".join(seeds),
            settings={
                "LARBIN_ALLOWED_NETWORKS": "127.0.5.0/24",
                "LARBIN_GATE_CGI_LEVEL": 1,
                "ROBOTSTXT_OBEY": False,
            },
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    everything = {(e["ip"], e["host"], e["path"]) for e in crawl.requests}
    assert not [r for r in everything if r[0] != HOST_IP], everything  # the outside one: nothing
    # each site's sitemap is looked for too; the rest is what the seeds and redirects led to
    requested = {r for r in everything if r[2] != "/sitemap.xml"}
    assert {(h, p) for _, h, p in requested} == {
        ("h.test", "/"),
        *(("h.test", p) for p in linked),
        ("h.test", "/target.html"),
        ("h.test", "/moved.html"),
        ("other.test", "/new-home.html"),
        *(("h.test", p) for p in ssrf),
    }, requested
    stats = crawl.stats
    for reason in ("extension", "domain", "external", "length", "cgi"):
        assert stats.get(f"larbin/filtered/{reason}") == 1, (reason, stats)
    assert stats.get("larbin/dropped/ssrf") == 4, stats
    assert {item["url"] for item in crawl.items} == {
        web.url("h.test", "/"),
        web.url("h.test", "/target.html"),
        web.url("other.test", "/new-home.html"),
    }
