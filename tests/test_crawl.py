"""Real ``scrapy crawl larbin`` runs over the test web, checked against its ground truth.

What is checked is what a user sees: the pages requested from the servers (their request log),
the items exported, the stats, the log. One default crawl (module fixture) serves the tests that
only read its results; each argument or setting under test gets its own crawl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest

from settings.base import FEED_EXPORT_FIELDS
from tests.support.crawl import ROOT, Crawl, crawl_command, run_crawl, seeds_args
from testweb.harness import RunningWeb, start_web

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

STOCK_ROBOTS = json.dumps(
    {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": 100,
        "larbinscrapy.middlewares.robots.RobotsMiddleware": None,
    }
)


def requested_urls(crawl: Crawl, port: int) -> set[str]:
    """Every URL the servers were asked for (robots.txt excluded), with their query."""
    return crawl.fetched(port)


def assert_no_trap_requested(web: RunningWeb, crawl: Crawl) -> None:
    fetched = requested_urls(crawl, web.port)
    assert not fetched & web.web.disallowed, "robots.txt-disallowed URLs were requested"
    assert not fetched & web.web.forbidden, "URLs with a forbidden extension were requested"
    assert not fetched & web.web.too_long, "URLs longer than 512 were requested"
    assert all(web.web.can_fetch(u) for u in fetched)


def assert_robots_first(crawl: Crawl) -> None:
    """larbin's order: no page of a host is requested before the host's robots.txt."""
    robots_seen: set[str] = set()
    for entry in crawl.requests:
        if entry["path"] == "/robots.txt":
            robots_seen.add(entry["host"])
        else:
            assert entry["host"] in robots_seen, f"{entry} requested before its robots.txt"


# -- one default crawl, read by many tests ------------------------------------------------
@pytest.fixture(scope="module")
def default_crawl(tmp_path_factory) -> tuple[RunningWeb, Crawl, Path]:
    """The test web crawled from its seeds with the defaults, exported with ``-O items.jsonl``."""
    tmp = tmp_path_factory.mktemp("default-crawl")
    with start_web(tmp / "web") as web:
        out = tmp / "out"
        out.mkdir()
        items_path = out / "items.jsonl"
        items_path.write_text('{"stale": "an earlier run -O must overwrite"}\n')
        cmd = crawl_command(web, out, *seeds_args(web.seeds))
        cmd[cmd.index("-o")] = "-O"
        started = datetime.now().astimezone()
        result = subprocess.run(
            cmd,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
        items = [json.loads(line) for line in items_path.read_text().splitlines() if line]
        stats = json.loads((out / "stats.json").read_text())
        crawl = Crawl(result.returncode, result.stderr, items, stats, web.read_log())
        crawl.started = started  # type: ignore[attr-defined]
        crawl.ended = datetime.now().astimezone()  # type: ignore[attr-defined]
        yield web, crawl, items_path


def test_default_crawl_fetches_the_ground_truth_and_no_trap(default_crawl):
    web, crawl, _ = default_crawl
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["finish_reason"] == "finished"
    assert requested_urls(crawl, web.port) == web.web.ground_truth(web.seeds, depth=5)
    assert_no_trap_requested(web, crawl)
    assert_robots_first(crawl)


def test_each_page_is_requested_once_and_each_robots_txt_once(default_crawl):
    web, crawl, _ = default_crawl
    twice = {u: n for u, n in crawl.fetch_counts(web.port).items() if n > 1}
    # The 500 page is retried once (RETRY_TIMES = 1); nothing else is fetched twice.
    assert twice == {web.url("h07.test", "/broken.html"): 2}
    robots = defaultdict(int)
    for entry in crawl.requests:
        if entry["path"] == "/robots.txt":
            robots[entry["host"]] += 1
    assert set(robots.values()) == {1}


def test_each_site_is_asked_once_for_its_sitemap_quietly(default_crawl):
    # LARBIN_SITEMAPS is on by default: each site the crawl reaches is asked for /sitemap.xml
    # (no robots.txt of the test web names a sitemap) once, after its robots.txt
    # (assert_robots_first). The test web has none: a 404, counted, no item, no warning.
    web, crawl, _ = default_crawl
    truth = web.web.sitemap_truth(web.seeds, depth=5)
    assert len(truth) >= 10
    assert crawl.sitemap_counts(web.port) == Counter(dict.fromkeys(truth, 1))
    assert crawl.stats["larbin/sitemaps/missing"] == len(truth)
    assert "larbin/sitemaps/broken" not in crawl.stats
    assert not any(urlsplit(i["url"]).path == "/sitemap.xml" for i in crawl.items)
    noisy = [
        line
        for line in crawl.stderr.splitlines()
        if "sitemap" in line.lower() and ("WARNING" in line or "ERROR" in line)
    ]
    assert noisy == []


def test_every_item_has_every_field(default_crawl):
    _web, crawl, _ = default_crawl
    assert crawl.items
    for item in crawl.items:
        # changed/fetch_count only in a continuous crawl (LARBIN_REVISIT, tests/test_revisit.py)
        assert set(item) == set(FEED_EXPORT_FIELDS) - {"changed", "fetch_count"}, item["url"]
        assert isinstance(item["depth"], int) and item["depth"] >= 0
        assert isinstance(item["status"], int)


def test_export_overwrites_and_leaves_body_and_headers_out(default_crawl):
    web, crawl, items_path = default_crawl
    assert "stale" not in items_path.read_text()
    for item in crawl.items:
        assert "body" not in item and "headers" not in item
    # Pages dropped as content duplicates, and non-HTML answers stopped at their headers (larbin
    # checkType), are the only fetched 200 pages without an item.
    urls = [i["url"] for i in crawl.items]
    assert len(urls) == len(set(urls))
    ok_pages = {
        u
        for u in requested_urls(crawl, web.port)
        if u in web.web.pages and web.web.pages[u].status == 200
    }
    dropped = crawl.stats.get("larbin/contentdup/dropped", 0)
    not_html = {u for u in ok_pages if not web.web.pages[u].is_html}
    assert set(urls) <= ok_pages
    assert len(ok_pages) - len(urls) == dropped + len(not_html)
    assert crawl.stats.get("larbin/dropped/content_type", 0) == len(not_html)
    duplicated = set().union(*web.web.duplicate_groups)
    assert ok_pages - set(urls) <= duplicated | not_html


def test_item_fields_match_what_the_server_sent(default_crawl):
    web, crawl, _ = default_crawl
    for item in crawl.items:
        page = web.web.pages[item["url"]]
        host = urlsplit(item["url"]).hostname
        assert item["status"] == page.status == 200
        assert item["content_type"] == page.content_type.split(";")[0]
        assert item["length"] == len(page.body), item["url"]
        assert item["ip"] == web.hosts[host]
        fetched_at = datetime.fromisoformat(item["fetched_at"])
        assert fetched_at.tzinfo is not None
        assert crawl.started.replace(microsecond=0) <= fetched_at <= crawl.ended


def test_titles_keywords_descriptions_are_the_declared_ones(default_crawl):
    web, crawl, _ = default_crawl
    checked = 0
    for item in crawl.items:
        page = web.web.pages[item["url"]]
        if page.is_html:
            assert item["title"] == page.title, item["url"]
            assert (item["keywords"] or "") == page.keywords, item["url"]
            assert (item["description"] or "") == page.description, item["url"]
            checked += bool(page.keywords and page.description)
        else:
            assert (item["title"], item["keywords"], item["description"]) == (None, None, None)
            assert item["links"] == []
    assert checked >= 1  # the about page declares both


def _with_path(url: str) -> str:
    """``http://h:1`` -> ``http://h:1/``: a browser requests the same URL for both."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path or "/"))


def test_links_are_absolute_and_the_declared_ones(default_crawl):
    web, crawl, _ = default_crawl
    kinds = web.url("h00.test", "/kinds/a/b/page.html")
    for item in crawl.items:
        for link in item["links"]:
            parts = urlsplit(link)
            assert parts.scheme in ("http", "https") and parts.hostname and not parts.fragment
        page = web.web.pages[item["url"]]
        # links.py keeps "http://host:port" without its "/" as LinkExtractor does: same URL.
        found = list(dict.fromkeys(_with_path(u) for u in item["links"]))
        assert found == page.links, item["url"]
    assert any(i["url"] == kinds for i in crawl.items)  # relative, ../, //host, base, ...


def test_referer_and_depth(default_crawl):
    web, crawl, _ = default_crawl
    by_url = {i["url"]: i for i in crawl.items}
    pages = web.web.pages
    starts = set(web.seeds) | {pages[s].redirect for s in web.seeds if pages[s].redirect}

    def leads_to(link: str, url: str) -> bool:  # directly or through redirects
        for _ in range(10):
            if link == url:
                return True
            page = pages.get(link)
            if page is None or page.redirect is None:
                return False
            link = page.redirect
        return False

    for item in crawl.items:
        url, referer = item["url"], item["referer"]
        if url in starts:
            assert referer is None and item["depth"] == 0, item
            continue
        assert referer is not None, item
        assert any(leads_to(link, url) for link in pages[referer].links), item
        if referer in by_url:
            assert item["depth"] == by_url[referer]["depth"] + 1, item


def test_filtered_stats_of_the_default_crawl(default_crawl):
    _web, crawl, _ = default_crawl
    stats = crawl.stats
    # /files.html: report.pdf, Holiday.JPG, archive.zip, source.tar.gz
    assert stats["larbin/filtered/extension"] == 4
    assert stats["larbin/filtered/length"] == 1  # the 80-part path on /kinds/a/b/page.html
    assert stats["larbin/filtered/depth"] >= 1  # h08's chain goes to /deep/10.html
    assert "larbin/filtered/external" not in stats
    assert stats["larbin/seeds/valid"] == 2


def test_no_deprecation_warning_no_telnet_no_remote_control(default_crawl):
    _, crawl, _ = default_crawl
    assert "Deprecat" not in crawl.stderr
    assert "Telnet console listening" not in crawl.stderr
    assert "TelnetConsole" not in crawl.stderr
    assert "RemoteControl" not in crawl.stderr
    assert "Traceback" not in crawl.stderr


@pytest.mark.parametrize(
    "setting", ["TELNETCONSOLE_ENABLED", "REMOTE_CONTROL_ENABLED", "AJAXCRAWL_ENABLED"]
)
def test_code_running_endpoints_are_off_by_default(setting):
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", setting],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "False"


# -- robots.txt when many requests wait for it at once ---------------------------------------------
def test_concurrent_requests_per_domain_8_still_fetches_no_trap(web, tmp_path):
    crawl = run_crawl(
        web,
        tmp_path / "out",
        *seeds_args(web.seeds),
        settings={"CONCURRENT_REQUESTS_PER_DOMAIN": 8, "LARBIN_IP_CONNECTIONS": 8},
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert requested_urls(crawl, web.port) == web.web.ground_truth(web.seeds, depth=5)
    assert_no_trap_requested(web, crawl)
    assert_robots_first(crawl)


def _racing_seeds(web: RunningWeb) -> list[str]:
    """Per host: its home page, then 8 robots-disallowed URLs, all queued at once as seeds."""
    seeds = []
    for host, tree in [
        ("h00.test", "/private/"),
        ("h01.test", "/nolarbin/"),
        ("h02.test", "/private/"),
        ("h08.test", "/private/"),
        ("alias01.test", "/private/"),
    ]:
        seeds.append(web.url(host, "/"))
        seeds += [web.url(host, f"{tree}p{i}.html") for i in range(8)]
    return seeds


def test_requests_waiting_on_one_robots_txt_are_all_checked(web, tmp_path):
    # 45 seeds on 5 hosts reach the downloader together, 8 per IP, while each host's robots.txt
    # is downloading. Scrapy's stock middleware lets every waiter but the first through
    # unchecked under the asyncio reactor (they share one Deferred and get None); ours must
    # check each one.
    seeds = _racing_seeds(web)
    disallowed = {s for s in seeds if not web.web.can_fetch(s)}
    assert len(disallowed) == 40
    args = (*seeds_args(seeds), "-a", "depth=0", "-a", "external=false")
    settings = {"CONCURRENT_REQUESTS_PER_DOMAIN": 8, "LARBIN_IP_CONNECTIONS": 8}

    ours = run_crawl(web, tmp_path / "ours", *args, settings=settings)
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert not requested_urls(ours, web.port) & disallowed
    assert requested_urls(ours, web.port) == web.web.ground_truth(seeds, depth=0, external=False)
    assert ours.stats["robotstxt/forbidden"] == len(disallowed)

    # The same crawl with Scrapy's own middleware: the check above catches its race.
    stock = run_crawl(
        web,
        tmp_path / "stock",
        *args,
        settings={**settings, "DOWNLOADER_MIDDLEWARES": STOCK_ROBOTS},
    )
    assert stock.returncode == 0, stock.stderr[-3000:]
    assert requested_urls(stock, web.port) & disallowed


# -- spider arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_depth_argument(web, tmp_path, depth):
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(web.seeds), "-a", f"depth={depth}")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=depth)
    assert truth != web.web.ground_truth(web.seeds, depth=depth + 1)
    assert requested_urls(crawl, web.port) == truth
    assert crawl.stats["larbin/filtered/depth"] >= 1
    assert_no_trap_requested(web, crawl)


def test_domains_argument(web, tmp_path):
    domains = ["h00.test", "h06.test"]
    crawl = run_crawl(
        web, tmp_path / "out", *seeds_args(web.seeds), "-a", "domains=" + ",".join(domains)
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=5, domains=domains)
    fetched = requested_urls(crawl, web.port)
    assert fetched == truth
    # the h07 seed is outside the domains and still crawled (seeds are not link-filtered)
    assert {urlsplit(u).hostname for u in fetched} == {"h00.test", "h06.test", "h07.test"}
    assert crawl.stats["larbin/filtered/domain"] >= 1


def test_domains_match_host_suffixes(web, tmp_path):
    # "01.test" matches no host: h01.test and alias01.test end with it, but not after a dot.
    crawl = run_crawl(
        web,
        tmp_path / "out",
        *seeds_args([web.url("h00.test", "/hosts.html")]),
        "-a",
        "depth=0",
        "-a",
        "domains=01.test,h02.test",
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert requested_urls(crawl, web.port) == {
        web.url("h00.test", "/hosts.html"),
        web.url("h02.test", "/"),
    }


def test_external_false(web, tmp_path):
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(web.seeds), "-a", "external=false")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=5, external=False)
    assert requested_urls(crawl, web.port) == truth
    assert {urlsplit(u).hostname for u in truth} == {"h00.test", "h07.test"}
    assert crawl.stats["larbin/filtered/external"] >= 10  # hosts.html alone links to 10


def test_images_true_follows_img_src(web, tmp_path):
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(web.seeds), "-a", "images=true")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=5, images=True)
    fetched = requested_urls(crawl, web.port)
    assert fetched == truth
    images = {web.url("h00.test", "/img/banner.webp"), web.url("h06.test", "/img/map.webp")}
    assert images <= fetched
    assert web.url("h00.test", "/img/logo.png") not in fetched  # still a forbidden extension
    assert_no_trap_requested(web, crawl)
    files = next(i for i in crawl.items if i["url"] == web.url("h00.test", "/files.html"))
    assert web.url("h00.test", "/img/banner.webp") in files["links"]


def test_images_default_false_does_not_follow_img_src(default_crawl):
    web, crawl, _ = default_crawl
    fetched = requested_urls(crawl, web.port)
    assert not fetched & {
        web.url("h00.test", "/img/banner.webp"),
        web.url("h06.test", "/img/map.webp"),
    }


# -- resume ------------------------------------------------------------------------------------
def test_finished_jobdir_crawl_run_again_fetches_nothing(web, tmp_path):
    args = (*seeds_args(web.seeds), "-s", f"JOBDIR={tmp_path / 'job'}")
    first = run_crawl(web, tmp_path / "first", *args)
    assert first.returncode == 0, first.stderr[-3000:]
    assert requested_urls(first, web.port) == web.web.ground_truth(web.seeds, depth=5)

    again = run_crawl(web, tmp_path / "again", *args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.fetch_counts(web.port) == {}  # not even the seeds
    assert again.sitemap_counts(web.port) == {}  # the sites' sitemaps were read: not again
    assert again.items == []
    assert again.stats["finish_reason"] == "finished"
