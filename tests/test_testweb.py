"""The test web: the model is self-consistent, and the real server serves exactly the model."""

from __future__ import annotations

import random
import signal
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor

from testweb.harness import RunningWeb, start_web
from testweb.web import Web, build_web, resolve_link

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

SLOW_DELAY = 0.5
PORT = 8123  # the pure tests need a port; any number builds the same web


# --- the pure model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def web() -> Web:
    return build_web("default", PORT)


def _redirect_closure(web: Web, urls: list[str]) -> set[str]:
    out = set(urls)
    for start in urls:
        url = start
        while (
            (page := web.pages.get(url)) is not None and page.redirect and page.redirect not in out
        ):
            url = page.redirect
            out.add(url)
    return out


def test_build_is_deterministic() -> None:
    a, b = build_web("default", 4000), build_web("default", 4000)
    assert a.pages == b.pages and a.robots == b.robots and a.hosts == b.hosts
    assert build_web("demo", 4000).pages == a.pages
    with pytest.raises(ValueError, match="unknown web"):
        build_web("nope", 4000)


def test_default_web_shape(web: Web) -> None:
    assert 150 <= len(web.pages) <= 300
    assert web.hosts["h01.test"] == web.hosts["alias01.test"]
    assert len(set(web.hosts.values())) == len(web.hosts) - 1
    assert len(web.duplicate_groups) >= 3
    for group in web.duplicate_groups:
        assert len({web.pages[u].body for u in group}) == 1
    assert web.crawl_delay("h03.test") == 1.0
    assert web.robots["h04.test"].status == 404
    assert all(web.can_fetch(u) for u in web.pages if urlsplit(u).hostname == "h05.test")
    assert {"pdf", "JPG", "zip", "gz"} <= {u.rsplit(".", 1)[-1] for u in web.forbidden}
    assert web.too_long and web.disallowed


def test_sitemap_truth_is_one_guess_per_site_reached(web: Web) -> None:
    # no robots.txt of the test web names a sitemap: a correct crawler guesses /sitemap.xml,
    # once for every site whose URLs reached its downloader, the robots-disallowed ones too
    sitemaps = web.sitemap_truth(web.seeds, depth=5)
    assert all(urlsplit(u).path == "/sitemap.xml" for u in sitemaps)
    assert not sitemaps & set(web.pages)  # the web serves none: set apart, never a page
    sites = {s.removesuffix("/sitemap.xml") for s in sitemaps}
    assert sites >= {f"http://{urlsplit(u).netloc}" for u in web.ground_truth(web.seeds, depth=5)}
    assert web.sitemap_truth(web.seeds, depth=5, order=random.Random(7)) == sitemaps
    assert len(web.sitemap_truth(web.seeds, depth=0)) < len(sitemaps)


def test_ground_truth_self_consistent(web: Web) -> None:
    truth = web.ground_truth(web.seeds)
    assert set(web.seeds) <= truth
    assert not truth & (web.disallowed | web.forbidden | web.too_long)
    assert not any(urlsplit(u).path == "/robots.txt" for u in truth)
    assert truth <= set(web.pages)  # nothing the crawler asks for is an accidental 404
    for url in truth:  # every page but the traps and the JS/error-only targets is reachable
        assert url.startswith("http://") and f":{PORT}/" in url
    unreached = set(web.pages) - truth - web.disallowed - web.forbidden - web.too_long
    assert {urlsplit(u).path for u in unreached} == {
        "/img/banner.webp",
        "/img/map.webp",
        "/popup.html",
        "/only-from-404.html",
        "/only-from-500.html",
    }
    assert web.url("h06.test", "/frames/inner.html") in truth  # only through an iframe
    assert web.url("h06.test", "/manual/v2/intro.html") in truth  # only through <base href>
    assert web.url("h06.test", "/base/intro.html") not in truth
    assert web.url("h02.test", "/private/open.html") in truth  # Allow beats Disallow
    assert web.url("h04.test", "/private/page.html") in truth  # robots.txt 404: all allowed
    assert (
        web.url("h07.test", "/loop/b.html") in truth
        and web.url("h07.test", "/new-page.html") in truth
    )


def test_depth_zero_gives_seeds_and_redirect_targets(web: Web) -> None:
    assert web.ground_truth(web.seeds, depth=0) == _redirect_closure(web, web.seeds)


def test_depth_limits_matter(web: Web) -> None:
    sizes = [len(web.ground_truth(web.seeds, depth=d)) for d in range(12)]
    assert sizes == sorted(sizes) and sizes[2] < sizes[5] < sizes[10]
    assert sizes[11] == len(web.ground_truth(web.seeds))
    deep = {web.url("h08.test", f"/deep/{i}.html") for i in range(1, 11)}
    assert deep & web.ground_truth(web.seeds, depth=5) == {
        web.url("h08.test", f"/deep/{i}.html") for i in range(1, 6)
    }


def test_external_and_domains_restrict(web: Web) -> None:
    seed_hosts = {urlsplit(s).hostname for s in web.seeds}
    internal = web.ground_truth(web.seeds, external=False)
    assert {urlsplit(u).hostname for u in internal} == seed_hosts
    assert internal == {
        u for u in web.ground_truth(web.seeds) if urlsplit(u).hostname in seed_hosts
    }
    only = web.ground_truth(web.seeds, domains=["h00.test", "h01.test"])
    assert {urlsplit(u).hostname for u in only} == {
        "h00.test",
        "h01.test",
        "h07.test",
    }  # seeds always


def test_images_and_extension_list(web: Web) -> None:
    base = web.ground_truth(web.seeds)
    with_images = web.ground_truth(web.seeds, images=True)
    assert with_images - base == {
        web.url("h00.test", "/img/banner.webp"),
        web.url("h06.test", "/img/map.webp"),
    }
    no_filter = web.ground_truth(web.seeds, forbidden_extensions=set(), max_url_length=10_000)
    assert no_filter - base == (web.forbidden | web.too_long) - {
        web.url("h00.test", "/img/logo.png")
    }


@pytest.mark.parametrize("external", [True, False])
def test_ground_truth_does_not_depend_on_fetch_order(web: Web, external: bool) -> None:
    for depth in [*range(11), None]:
        expected = web.ground_truth(web.seeds, depth=depth, external=external)
        for seed in range(10):
            got = web.ground_truth(
                web.seeds, depth=depth, external=external, order=random.Random(seed)
            )
            assert got == expected, (depth, seed)


def test_declared_links_are_what_scrapy_finds(web: Web) -> None:
    extractor = LinkExtractor(
        tags=("a", "area", "link", "frame", "iframe"),
        attrs=("href", "src"),
        deny_extensions=[],
        unique=True,
    )
    for url, page in web.pages.items():
        if not page.is_html or page.redirect:
            continue
        response = HtmlResponse(url, body=page.body, headers={"Content-Type": page.content_type})
        found = {resolve_link(link.url, link.url) for link in extractor.extract_links(response)}
        assert found == set(page.links), url


def test_skewed_web() -> None:
    skewed = build_web("skewed", PORT)
    truth = skewed.ground_truth(skewed.seeds)
    by_host: dict[str, int] = {}
    for url in truth:
        by_host[urlsplit(url).hostname or ""] = by_host.get(urlsplit(url).hostname or "", 0) + 1
    assert by_host.pop("big.test") == 600
    assert len(by_host) == 10 and set(by_host.values()) == {10}


# --- the real server ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWeb]:
    with start_web(tmp_path_factory.mktemp("testweb"), slow_delay=SLOW_DELAY) as server:
        yield server


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get(server: RunningWeb, url: str) -> tuple[int, dict[str, str], bytes]:
    """GET ``url`` at its host's IP with a Host header: no /etc/hosts, no redirects followed."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    ip = server.hosts.get(parts.hostname or "", "127.0.1.1")
    request = urllib.request.Request(
        f"http://{ip}:{server.port}{target}", headers={"Host": parts.netloc}
    )
    try:
        with _OPENER.open(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read()


def test_routing_by_host_on_one_ip(running: RunningWeb) -> None:
    a, b = (
        running.url("h01.test", "/same-path.html"),
        running.url("alias01.test", "/same-path.html"),
    )
    status_a, _, body_a = _get(running, a)
    status_b, _, body_b = _get(running, b)
    assert status_a == status_b == 200 and body_a != body_b
    assert (body_a, body_b) == (running.web.pages[a].body, running.web.pages[b].body)
    assert _get(running, f"http://nowhere.test:{running.port}/")[0] == 404
    assert _get(running, running.url("h01.test", "/no-such-page.html"))[0] == 404


def test_request_log_records_ip_host_path(running: RunningWeb) -> None:
    before = time.time()
    _get(running, running.url("alias01.test", "/alias-only.html?x=1"))
    record = running.read_log()[-1]
    assert record["ip"] == "127.0.1.2" and record["host"] == "alias01.test"
    assert record["path"] == "/alias-only.html?x=1" and record["status"] == 404
    assert before - 1 <= record["t"] <= time.time()


def test_robots_txt_served(running: RunningWeb) -> None:
    status, headers, body = _get(running, running.url("h00.test", "/robots.txt"))
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert b"Disallow: /private/" in body and int(headers["Content-Length"]) == len(body)
    assert _get(running, running.url("h04.test", "/robots.txt"))[0] == 404
    assert (
        _get(running, running.url("h05.test", "/robots.txt"))[2]
        == running.web.robots["h05.test"].body
    )


def test_redirects_are_not_followed_by_the_server(running: RunningWeb) -> None:
    status, headers, _ = _get(running, running.url("h07.test", "/older-page.html"))
    assert status == 302 and headers["Location"] == "/new-page.html"


def test_slow_host_is_slow_and_logged_on_arrival(running: RunningWeb) -> None:
    start = time.time()
    assert _get(running, running.url("slow.test", "/"))[0] == 200
    assert time.time() - start >= SLOW_DELAY * 0.9
    record = running.read_log()[-1]
    assert record["host"] == "slow.test" and record["t"] < start + SLOW_DELAY / 2
    start = time.time()
    _get(running, running.url("h00.test", "/"))
    assert time.time() - start < SLOW_DELAY / 2


def test_every_ground_truth_page_served_as_declared(running: RunningWeb) -> None:
    web = running.web
    for url in sorted(web.ground_truth(running.seeds, images=True)):
        page = web.pages[url]
        status, headers, body = _get(running, url)
        assert (status, body) == (page.status, page.body), url
        assert headers["Content-Type"] == page.content_type and int(
            headers["Content-Length"]
        ) == len(body)
        if page.redirect:
            assert resolve_link(headers["Location"], url) == page.redirect
    for url in sorted(web.forbidden):
        assert _get(running, url)[0] == 200  # served, so a crawl test can prove none was fetched


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_log_survives_stop_and_kill(tmp_path: Path, sig: signal.Signals) -> None:
    server = start_web(tmp_path, slow_delay=0)
    try:
        assert _get(server, server.url("h02.test", "/dup/a.html"))[0] == 200
        server.proc.send_signal(sig)
        code = server.proc.wait(timeout=5)
    finally:
        server.stop()
    assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)
    assert [(r["host"], r["path"]) for r in server.read_log()] == [("h02.test", "/dup/a.html")]
