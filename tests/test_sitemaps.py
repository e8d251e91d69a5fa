"""Sitemaps over real crawls of the changing web's sitemap sites, and the parser on bad input.

``s1.test``'s pages are linked from nowhere: robots.txt names a sitemap index, which names a
plain and a gzipped sitemap. ``s2.test`` has only ``/sitemap.xml``. ``s3.test``'s robots.txt
names a sitemap that is HTML and one whose gzip is garbage. ``s4.test`` has no robots.txt and
answers ``/sitemap.xml`` with an HTML page (a soft 404).
"""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.seeds.hints import sitemap_hint
from larbinscrapy.seeds.pending import PendingSites
from larbinscrapy.seeds.sitemaps import BrokenSitemap, guessed_sitemap, parse_sitemap
from tests.support.crawl import ROOT, crawl_command, run_crawl, seeds_args
from testweb.changing import SITEMAP_HOSTS, start_changing

if TYPE_CHECKING:
    from pathlib import Path

ONLY = {f"s1.test/only/a{i}.html" for i in range(5)} | {f"s1.test/only/b{i}.html" for i in range(5)}
ONLY |= {f"s2.test/only/c{i}.html" for i in range(3)}


@pytest.fixture
def sites(tmp_path: Path):
    with start_changing(tmp_path / "web") as running:
        yield running


def crawl_sites(sites, out: Path, **settings):
    seeds = seeds_args([sites.url(h) for h in SITEMAP_HOSTS])
    crawl = run_crawl(sites, out, *seeds, settings=settings, timeout=60)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    fetched = {r["host"] + r["path"] for r in crawl.requests}
    return crawl, fetched


@pytest.mark.crawl
def test_pages_listed_only_in_sitemaps_are_crawled(sites, tmp_path):
    crawl, fetched = crawl_sites(sites, tmp_path / "on", LARBIN_SITEMAPS=True)
    assert fetched >= ONLY
    stats = crawl.stats
    assert stats["larbin/sitemaps/sites"] == 4
    assert stats["larbin/sitemaps/files"] == 4  # s1: index, a.xml, b.xml.gz; s2: sitemap.xml
    assert stats["larbin/sitemaps/broken"] == 2  # s3: not XML, bad gzip; the crawl goes on
    assert stats["larbin/sitemaps/missing"] == 1  # s4's soft 404: not broken, nobody listed it
    assert stats["larbin/sitemaps/queued"] == len(ONLY)
    assert "Unreadable sitemap" in crawl.stderr and "Traceback" not in crawl.stderr
    assert "s4.test" not in crawl.stderr
    # /sitemap.xml is a guess for sites whose robots.txt names no sitemap (s2, s4), asked once
    guesses = sorted(r["host"] for r in crawl.requests if r["path"] == "/sitemap.xml")
    assert guesses == ["s2.test", "s4.test"]
    # and each sitemap file was read once
    maps = [r["path"] for r in crawl.requests if "/maps/" in r["path"]]
    assert sorted(maps) == ["/maps/a.xml", "/maps/b.xml.gz", "/maps/index.xml"]


@pytest.mark.crawl
def test_with_the_guess_off_only_listed_sitemaps_are_asked_for(sites, tmp_path):
    # LARBIN_SITEMAP_GUESS=False: robots.txt's Sitemap: lines are read (s1, s3), but a site
    # whose robots.txt names none (s2) or that has none (s4) is not asked for /sitemap.xml:
    # one request a site less in a broad crawl, where most sites have no sitemap there
    crawl, fetched = crawl_sites(sites, tmp_path / "listed", LARBIN_SITEMAP_GUESS=False)
    assert {u for u in ONLY if u.startswith("s1.test")} <= fetched
    assert not {u for u in ONLY if u.startswith("s2.test")} & fetched  # only its sitemap has them
    assert not [r for r in crawl.requests if r["path"] == "/sitemap.xml"]
    stats = crawl.stats
    assert stats["larbin/sitemaps/sites"] == 2  # s1 and s3
    assert stats["larbin/sitemaps/files"] == 3  # s1: index, a.xml, b.xml.gz
    assert stats["larbin/sitemaps/broken"] == 2  # s3's two, as with the guess on
    assert "larbin/sitemaps/missing" not in stats


@pytest.mark.crawl
def test_without_sitemaps_those_pages_are_unreachable(sites, tmp_path):
    _, fetched = crawl_sites(sites, tmp_path / "off", LARBIN_SITEMAPS=False)
    assert not (ONLY & fetched)
    assert not any("/maps/" in path or "sitemap" in path for path in fetched)


def stopped_after_first(
    sites, out: Path, seeds: list[str], settings, stop, wait: float
) -> list[str]:
    """Crawl until the web's first request, ``wait`` seconds more, then ``stop`` the crawl
    (a signal); the paths the web served meanwhile."""
    out.mkdir()
    log_start = len(sites.read_log())
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.Popen(
            crawl_command(sites, out, *seeds, settings=settings),
            cwd=ROOT,
            stdout=err,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        deadline = time.monotonic() + 30
        while not sites.read_log()[log_start:]:
            assert proc.poll() is None and time.monotonic() < deadline, "no request"
            time.sleep(0.02)
        time.sleep(wait)
        proc.send_signal(stop)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return [r["path"] for r in sites.read_log()[log_start:]]


@pytest.mark.crawl
def test_a_sitemap_a_kill_cut_short_is_read_on_resume(sites, tmp_path):
    # s1.test's robots.txt names its sitemap index, asked for a delay after the robots.txt. A
    # kill -9 in that delay (once the seen-set journal reached the disk) must not leave the site
    # marked read: the resumed crawl reads its sitemaps and fetches the pages only they list.
    settings = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY": 3}
    seeds = seeds_args([sites.url("s1.test")])
    # the dupefilter journal is flushed every second; the delay is 3 s
    served = stopped_after_first(sites, tmp_path / "run1", seeds, settings, signal.SIGKILL, 2.0)
    assert served == ["/robots.txt"]
    settings["DOWNLOAD_DELAY"] = 0.2  # the resumed run need not wait
    crawl = run_crawl(sites, tmp_path / "run2", *seeds, settings=settings, timeout=60)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    paths = [r["path"] for r in crawl.requests]
    assert {u.removeprefix("s1.test") for u in ONLY if u.startswith("s1.test")} <= set(paths)
    assert paths.count("/maps/index.xml") == 1


@pytest.mark.crawl
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGKILL])
def test_a_sitemap_a_stop_left_unread_is_read_on_resume_with_the_sites_pages_done(
    sites, tmp_path, stop
):
    # Without robots.txt, s2.test's sitemap is started by its seed's response and waits
    # for the host's delay. A stop in that wait (SIGINT: the held request ends unsent; kill -9)
    # leaves the site unread with its only page done: the resumed crawl fetches nothing of
    # s2.test that would start the site again, yet it must read its sitemap (CI: a scrapyd job
    # cancelled and scheduled again never asked alias01.test for its sitemap).
    settings = {"JOBDIR": str(tmp_path / "job"), "DOWNLOAD_DELAY": 4, "ROBOTSTXT_OBEY": False}
    seeds = seeds_args([sites.url("s2.test", "/only/c0.html")])  # a page that links nowhere
    # the page acknowledged and the journals flushed; the delay is 4 s
    served = stopped_after_first(sites, tmp_path / "run1", seeds, settings, stop, 1.5)
    assert served == ["/only/c0.html"]
    settings["DOWNLOAD_DELAY"] = 0.2  # the resumed run need not wait
    crawl = run_crawl(sites, tmp_path / "run2", *seeds, settings=settings, timeout=60)
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    paths = [r["path"] for r in crawl.requests]
    assert sorted(paths) == ["/only/c1.html", "/only/c2.html", "/sitemap.xml"]  # c0 was done
    assert crawl.stats["larbin/sitemaps/resumed"] == 1


@pytest.mark.crawl
def test_files_and_urls_per_site_are_bounded(sites, tmp_path):
    crawl, fetched = crawl_sites(
        sites,
        tmp_path / "capped",
        LARBIN_SITEMAPS=True,
        LARBIN_SITEMAP_FILES_MAX=2,
        LARBIN_SITEMAP_URLS_MAX=2,
    )
    s1 = {url for url in fetched if url.startswith("s1.test/only/")}
    assert s1 == {"s1.test/only/a0.html", "s1.test/only/a1.html"}  # 2 URLs of a.xml; no b
    assert "s1.test/maps/b.xml.gz" not in fetched  # s1's third file: index, a.xml, b.xml.gz
    assert crawl.stats["larbin/sitemaps/capped"] == 1
    assert crawl.stats["larbin/sitemaps/truncated"] == 2  # a.xml (5 URLs), s2's (3)


URLSET = (
    b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    b"<url><loc>http://a.test/1</loc><lastmod>2026-01-01</lastmod></url>"
    b"<url><loc>http://a.test/2</loc><changefreq>weekly</changefreq></url></urlset>"
)


@pytest.mark.parametrize(
    ("body", "kind", "n"),
    [
        (URLSET, "urlset", 2),
        (gzip.compress(URLSET), "urlset", 2),
        (
            b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap>'
            b"<loc>http://a.test/s.xml</loc></sitemap></sitemapindex>",
            "sitemapindex",
            1,
        ),
    ],
)
def test_parse_sitemap(body, kind, n):
    got_kind, entries, truncated = parse_sitemap(body, 1 << 20, 10)
    assert (got_kind, len(entries), truncated) == (kind, n, False)


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>no</body></html>",  # not a sitemap
        b"\x1f\x8b\x08\x00garbage",  # bad gzip
        b"",  # empty
        b"\x00\xff binary",
        b'<!DOCTYPE x [<!ENTITY a "aaaa">]><urlset>&a;&a;</urlset>' * 1,  # entities not expanded
        gzip.compress(b"<urlset>" + b"<url><loc>http://a.test/</loc></url>" * 40000 + b"</urlset>"),
    ],
)
def test_broken_sitemaps_raise_one_exception(body):
    try:
        kind, entries, _ = parse_sitemap(body, 1 << 20, 10)
    except BrokenSitemap as exc:
        assert exc.reason == "broken"  # noqa: PT017 - either outcome is right: see the else
    else:  # lxml recovers some inputs into an empty urlset: harmless, nothing queued
        assert kind == "urlset" and not entries


def test_urls_per_file_are_capped():
    kind, entries, truncated = parse_sitemap(URLSET, 1 << 20, 1)
    assert (kind, len(entries), truncated) == ("urlset", 1, True)


def test_sitemap_hints():
    now = 1_800_000_000.0
    assert sitemap_hint("daily", None, now) == 86400
    assert sitemap_hint(" Weekly ", "2020-01-01", now) == 7 * 86400
    assert sitemap_hint(None, "2027-01-14T08:00:00Z", now) == pytest.approx(now - 1_799_913_600)
    assert sitemap_hint("sometimes", None, now) is None
    assert sitemap_hint(None, "not a date", now) is None
    assert sitemap_hint(None, "2099-01-01", now) is None  # in the future: no hint


@pytest.mark.parametrize(
    ("site", "url"),
    [
        ("https://a.test:443", "https://a.test/sitemap.xml"),
        ("http://a.test:80", "http://a.test/sitemap.xml"),
        ("https://a.test:8443", "https://a.test:8443/sitemap.xml"),
    ],
)
def test_the_guessed_sitemap_is_written_as_a_browser_writes_it(site, url):
    assert guessed_sitemap(site) == url


def test_pending_sites_keep_the_unread_ones_and_skip_a_torn_line(tmp_path):
    path = tmp_path / "sitemaps" / "pending"
    first = PendingSites(path)
    assert first.open(lambda site: False) == {}
    first.add("http://a.test", ["http://a.test/s.xml"])
    first.add("http://b.test", [])
    first.add("http://c.test", [])
    first.close()
    with open(path, "ab") as f:
        f.write(b'["http://d.test",[')  # a kill in the last write
    read = {"http://b.test"}
    again = PendingSites(path)
    assert again.open(read.__contains__) == {
        "http://a.test": ["http://a.test/s.xml"],
        "http://c.test": [],
    }
    again.close()
    assert len(path.read_bytes().splitlines()) == 2  # rewritten with the unread ones alone
    assert PendingSites(None).open(read.__contains__) == {}  # no JOBDIR: nothing kept
