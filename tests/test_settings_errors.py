"""A mistake in a setting or a spider argument, as ``scrapy crawl larbin`` reports it.

One row of issue 27's table each. A wrong value or an unknown ``-a`` name stops the crawl
before it fetches anything: exit status 1, one ERROR line that names it and says what it takes,
no traceback. An unknown ``LARBIN_*`` name is a warning naming the closest known one, and the
crawl goes on.
"""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.spiders.larbin import LarbinSpider, SpiderArgumentError
from tests.support.crawl import ROOT, crawl_command
from testweb.harness import pages

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb


def _crawl(
    web: RunningWeb, out: Path, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    cmd = crawl_command(
        web,
        out,
        "-a",
        "urls=" + web.seeds[0],
        "-a",
        "depth=0",
        *args,
        settings={"LARBIN_STATUS_PORT": 0},
    )
    return subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def _lines(log: str, level: str) -> list[str]:
    return [line for line in log.splitlines() if f"] {level}:" in line]


def _fetched(web: RunningWeb) -> set[str]:
    return pages(web.read_log(), web.port)  # robots.txt and /sitemap.xml set apart


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        (
            "LARBIN_DUPEFILTER_MODE=nonsense",
            ["LARBIN_DUPEFILTER_MODE='nonsense'", "one of 'scalable', 'bloom', 'bitmap'"],
        ),
        ("LARBIN_IP_DELAY=abc", ["LARBIN_IP_DELAY='abc'", "a number >= 0"]),
        (
            "LARBIN_RESOLVE=not a mapping",
            ["LARBIN_RESOLVE='not a mapping'", "a mapping of host to IP"],
        ),
        (
            "LARBIN_FRONTIER_URLS_PER_SITE_MAX=-5",
            ["LARBIN_FRONTIER_URLS_PER_SITE_MAX='-5'", "an integer >= 1"],
        ),
        ("LARBIN_IP_DELAY=-1", ["LARBIN_IP_DELAY='-1'", "a number >= 0"]),
        # issue 34: Scrapy's own settings too; inf hung after "Spider opened", -1 fetched nothing
        # silently, 0 was ignored, LARBIN_IP_DELAY=inf was capped without a word
        ("DOWNLOAD_DELAY=inf", ["DOWNLOAD_DELAY='inf'", "a number >= 0 (a finite one)"]),
        ("DOWNLOAD_TIMEOUT=-1", ["DOWNLOAD_TIMEOUT='-1'", "a number > 0"]),
        ("CONCURRENT_REQUESTS=0", ["CONCURRENT_REQUESTS='0'", "an integer >= 1"]),
        ("LARBIN_IP_DELAY=inf", ["LARBIN_IP_DELAY='inf'", "(a finite one)"]),
        # a renamed setting's old name is still read: the message names the new one
        ("LARBIN_MAX_URLS_PER_SITE=-5", ["LARBIN_FRONTIER_URLS_PER_SITE_MAX='-5'", "an integer"]),
    ],
)
@pytest.mark.crawl
def test_wrong_value_stops_the_crawl_with_one_line(web, tmp_path, setting, words):
    # The command line's own -s LARBIN_RESOLVE comes first: this one, later, wins.
    result = _crawl(web, tmp_path, "-s", setting)
    log = result.stderr
    assert result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    errors = _lines(log, "ERROR") + _lines(log, "CRITICAL")
    assert len(errors) == 1, errors or log[-3000:]
    for word in words:
        assert word in errors[0], (word, errors[0])
    assert _fetched(web) == set()


@pytest.mark.crawl
def test_unknown_spider_argument_stops_with_one_line_listing_the_known_ones(web, tmp_path):
    result = _crawl(web, tmp_path, "-a", "depht=2")
    log = result.stderr
    assert result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    errors = _lines(log, "ERROR")
    assert len(errors) == 1, errors or log[-3000:]
    assert "-a depht=2 (did you mean depth?)" in errors[0]
    for name in ("seeds", "urls", "depth", "domains", "external", "images"):
        assert f"-a {name}=" in errors[0]
    assert _fetched(web) == set()


@pytest.mark.crawl
def test_unknown_setting_name_warns_with_the_closest_known_one(web, tmp_path):
    result = _crawl(web, tmp_path, "-s", "LARBIN_IP_DELAI=1")
    log = result.stderr
    assert result.returncode == 0, log[-3000:]
    warnings = [line for line in _lines(log, "WARNING") if "LARBIN_IP_DELAI" in line]
    assert len(warnings) == 1, log[-3000:]
    assert "unknown setting LARBIN_IP_DELAI ignored (did you mean LARBIN_IP_DELAY?)" in warnings[0]
    assert _fetched(web) == {web.seeds[0]}, log[-3000:]  # the crawl went on


@pytest.mark.crawl
def test_an_old_setting_name_still_works_and_warns_once(web, tmp_path):
    result = _crawl(web, tmp_path, "-s", "LARBIN_MAX_LINKS_PER_PAGE=50")
    log = result.stderr
    assert result.returncode == 0, log[-3000:]
    warnings = [line for line in _lines(log, "WARNING") if "LARBIN_MAX_LINKS_PER_PAGE" in line]
    assert len(warnings) == 1, log[-3000:]
    assert (
        "setting LARBIN_MAX_LINKS_PER_PAGE is deprecated: it is now LARBIN_LINKS_PER_PAGE_MAX"
    ) in warnings[0]
    assert _fetched(web) == {web.seeds[0]}, log[-3000:]


def test_spider_refuses_an_unknown_argument_and_lets_scrapyds_job_through():
    with pytest.raises(SpiderArgumentError, match=r"-a depht=2 \(did you mean depth\?\)"):
        LarbinSpider(depht="2")
    with pytest.raises(SpiderArgumentError, match="-a colour=red; the larbin spider takes"):
        LarbinSpider(colour="red")
    assert LarbinSpider(_job="abc", depth="2").depth_arg == 2
