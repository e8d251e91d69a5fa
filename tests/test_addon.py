"""larbinscrapy in a Scrapy project of the user's own, through ``LarbinAddon``.

A project made by ``scrapy startproject``, with a spider and a pipeline of its own, adds
``ADDONS = {"larbinscrapy.addon.LarbinAddon": 0}`` and one larbin setting of its own
(``LARBIN_DEPTH = 1``) to its ``settings.py``, and crawls the test web with ``scrapy crawl
larbin`` from its own directory: the project's pipeline sees every page, its setting wins over
the add-on's default, its own spider still runs, and a wrong ``LARBIN_*`` value stops its crawls
with one line too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from scrapy.settings import SETTINGS_PRIORITIES, Settings

from larbinscrapy.addon import LarbinAddon
from tests.support.crawl import ROOT
from testweb.harness import pages

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

PIPELINE = '''
import json


class SeenPipeline:
    """Writes the URL of every item it sees, one JSON line each."""

    def __init__(self, path):
        self.path = path

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings["MYPROJ_SEEN_FILE"])

    def open_spider(self, spider=None):
        self.file = open(self.path, "a")

    def close_spider(self, spider=None):
        self.file.close()

    def process_item(self, item, spider=None):
        self.file.write(json.dumps(item["url"]) + "\\n")
        return item
'''

SPIDER = """
import scrapy


class MineSpider(scrapy.Spider):
    name = "mine"

    async def start(self):
        yield {"url": "mine:start"}
"""


def _project(tmp_path: Path) -> Path:
    """``scrapy startproject myproj``, with the add-on, a pipeline and a spider of its own."""
    subprocess.run(
        [sys.executable, "-m", "scrapy", "startproject", "myproj", str(tmp_path)],
        check=True,
        capture_output=True,
        env=_env(),
    )
    package = tmp_path / "myproj"
    (package / "pipelines.py").write_text(PIPELINE)
    (package / "spiders" / "mine.py").write_text(SPIDER)
    with open(package / "settings.py", "a") as settings:
        settings.write(
            '\nADDONS = {"larbinscrapy.addon.LarbinAddon": 0}\n'
            'ITEM_PIPELINES = {"myproj.pipelines.SeenPipeline": 800}\n'
            "LARBIN_DEPTH = 1  # the project's own choice: the add-on's default is 5\n"
            f"MYPROJ_SEEN_FILE = {str(tmp_path / 'seen.jsonl')!r}\n"
        )
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    return {**env, "PYTHONPATH": str(ROOT)}  # larbinscrapy from this tree, as the other crawls


def _scrapy(project: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _seen(project: Path) -> list[str]:
    path = project / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return _project(tmp_path / "project")


@pytest.mark.crawl
def test_larbin_crawls_from_a_startproject_project_through_its_own_pipeline(
    project: Path, web: RunningWeb
):
    out = project / "items.jsonl"
    result = _scrapy(
        project,
        "crawl",
        "larbin",
        "-a",
        "urls=" + ",".join(web.seeds),
        "-s",
        "LARBIN_RESOLVE=" + json.dumps(web.resolve),
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        "DOWNLOAD_DELAY=0",  # the template's own DOWNLOAD_DELAY = 1 is slow
        "-s",
        f"LARBIN_STATS_FILE={project / 'stats.json'}",
        "-o",
        str(out),
    )
    log = result.stderr
    assert result.returncode == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    # The project's LARBIN_DEPTH = 1 won over the add-on's 5 (which would reach more pages).
    fetched = pages(web.read_log(), web.port)
    assert fetched == web.web.ground_truth(web.seeds, depth=1)
    assert fetched != web.web.ground_truth(web.seeds, depth=5)
    # The project's pipeline saw every item, once, beside larbin's own pipelines.
    items = [json.loads(line)["url"] for line in out.read_text().splitlines()]
    assert sorted(_seen(project)) == sorted(items)
    # ...and that is every HTML page fetched with a 2xx, but byte-identical bodies (larbin's
    # content-duplicate pipeline, before the project's, keeps one of each group).
    ok_pages = {
        u for u in fetched if 200 <= web.web.pages[u].status < 300 and web.web.pages[u].is_html
    }
    duplicates = {u for group in web.web.duplicate_groups for u in group}
    assert items and set(items) <= ok_pages and len(set(items)) == len(items)
    assert ok_pages - set(items) <= duplicates
    assert "myproj.pipelines.SeenPipeline" in log
    assert "larbinscrapy.pipelines.contentdup.ContentDupPipeline" in log
    # larbin's frontier, seen-set and politeness ran (their stats), not Scrapy's defaults.
    stats = json.loads((project / "stats.json").read_text())
    assert stats["larbin/seeds/valid"] == len(web.seeds)
    assert stats["finish_reason"] == "finished"
    assert stats["larbin/host/seen"] > 0 and stats["larbin/ip/seen"] > 0


@pytest.mark.crawl
def test_the_projects_own_spider_still_runs(project: Path):
    result = _scrapy(project, "crawl", "mine", "-s", "LARBIN_STATUS_PORT=0")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _seen(project) == ["mine:start"]


@pytest.mark.crawl
@pytest.mark.parametrize("spider", ["larbin", "mine"])
def test_a_wrong_value_stops_a_projects_crawl_with_one_line(project: Path, spider: str):
    result = _scrapy(
        project, "crawl", spider, "-a", "urls=http://h.test/", "-s", "LARBIN_IP_DELAY=abc"
    )
    log = result.stderr
    assert result.returncode == 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    errors = [line for line in log.splitlines() if "] ERROR:" in line]
    assert len(errors) == 1, log[-3000:]
    assert "LARBIN_IP_DELAY='abc'" in errors[0] and "a number >= 0" in errors[0]


def test_addon_merges_component_dicts_and_gives_way_to_the_project():
    warc = "larbinscrapy.pipelines.warc.WarcPipeline"
    settings = Settings(
        {  # the project's settings.py (project priority)
            "ITEM_PIPELINES": {"myproj.pipelines.SeenPipeline": 800, warc: None},
            "SPIDER_MODULES": ["myproj.spiders"],
            "LARBIN_DEPTH": 1,
        }
    )
    settings.set("LARBIN_IP_DELAY", "2", priority="cmdline")
    LarbinAddon.update_pre_crawler_settings(settings)
    pipelines = settings["ITEM_PIPELINES"]
    assert pipelines["myproj.pipelines.SeenPipeline"] == 800
    assert pipelines[warc] is None  # the project turned it off: it stays off
    assert pipelines["larbinscrapy.pipelines.contentdup.ContentDupPipeline"] == 100
    assert settings.getlist("SPIDER_MODULES") == ["myproj.spiders", "larbinscrapy.spiders"]
    assert settings.getint("LARBIN_DEPTH") == 1
    assert settings.getfloat("LARBIN_IP_DELAY") == 2
    assert settings["SCHEDULER"] == "larbinscrapy.frontier.scheduler.LarbinScheduler"
    assert settings.getpriority("SCHEDULER") == SETTINGS_PRIORITIES["addon"]
    assert settings.getint("LARBIN_LINKS_PER_PAGE_MAX") == 10_000  # what the spider reads
