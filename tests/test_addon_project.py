"""The add-on in someone else's project (issue 34, point 8): ``scrapy parse`` works without
``COMMANDS_MODULE``, the project's feeds keep their fields, a likely typo of a Scrapy setting
suggests it, and a ``JOBDIR`` another crawl is using is refused in the crawl's words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from scrapy.settings import Settings

from larbinscrapy.addon import LarbinAddon
from larbinscrapy.conf import check as config
from larbinscrapy.spiders.larbin import LarbinSpider
from tests.support.crawl import ROOT
from tests.support.status import LiveCrawl

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

SPIDER = """
import scrapy


class MineSpider(scrapy.Spider):
    name = "mine"

    async def start(self):
        yield {"url": "mine:start", "price": 3}
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SCRAPY_SETTINGS_MODULE"}
    return {**env, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``scrapy startproject``, the add-on line and a spider of its own; nothing else."""
    where = tmp_path / "project"
    subprocess.run(
        [sys.executable, "-m", "scrapy", "startproject", "myproj", str(where)],
        check=True,
        capture_output=True,
        env=_env(),
    )
    (where / "myproj" / "spiders" / "mine.py").write_text(SPIDER)
    with open(where / "myproj" / "settings.py", "a") as settings:
        settings.write('\nADDONS = {"larbinscrapy.addon.LarbinAddon": 0}\n')
    return where


def _scrapy(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=project,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.crawl
def test_scrapy_parse_works_in_a_project_without_commands_module(project: Path, web: RunningWeb):
    url = web.web.url("h00.test", "/kinds/a/b/page.html")
    result = _scrapy(
        project,
        "parse",
        "--spider",
        "larbin",
        "--nocolour",
        "-s",
        "LARBIN_RESOLVE=" + json.dumps(web.resolve),
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        "LARBIN_STATUS_PORT=0",
        url,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no seeds" not in result.stderr, result.stderr[-3000:]
    assert f"'url': '{url}'" in result.stdout, result.stdout[-3000:]


@pytest.mark.crawl
def test_the_projects_own_items_keep_their_fields_in_feeds(project: Path):
    out = project / "mine.jsonl"
    result = _scrapy(project, "crawl", "mine", "-s", "LARBIN_STATUS_PORT=0", "-O", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"url": "mine:start", "price": 3}
    ]


def test_feed_fields_larbins_for_its_spider_the_projects_when_it_chose_them():
    settings = Settings()
    LarbinAddon.update_pre_crawler_settings(settings)
    assert settings.get("FEED_EXPORT_FIELDS") is None  # a project's other spiders: every field
    LarbinSpider.update_settings(settings)
    assert "body" not in settings.getlist("FEED_EXPORT_FIELDS")
    assert settings.getlist("FEED_EXPORT_FIELDS")[0] == "url"
    chosen = Settings({"FEED_EXPORT_FIELDS": ["url", "title"]})
    LarbinAddon.update_pre_crawler_settings(chosen)
    LarbinSpider.update_settings(chosen)
    assert chosen.getlist("FEED_EXPORT_FIELDS") == ["url", "title"]


def test_a_larbin_prefix_on_a_scrapy_setting_suggests_the_scrapy_one():
    settings = Settings({"LARBIN_REDIS_URL": "redis://127.0.0.1:1"})
    LarbinAddon.update_pre_crawler_settings(settings)
    (warning,) = config.check(settings)
    assert "LARBIN_REDIS_URL" in warning and "did you mean REDIS_URL?" in warning, warning


@pytest.mark.crawl
def test_a_jobdir_in_use_is_refused_in_the_crawls_words(web: RunningWeb, tmp_path: Path):
    first = LiveCrawl(web, tmp_path / "one", settings={"DOWNLOAD_DELAY": 2.0})
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "scrapy",
                "crawl",
                "larbin",
                "-a",
                "urls=" + web.seeds[0],
                "-s",
                f"JOBDIR={first.jobdir}",
                "-s",
                "LARBIN_STATUS_PORT=0",
                "-s",
                "LARBIN_RESOLVE=" + json.dumps(web.resolve),
                "-s",
                "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env=_env(),
        )
        assert first.proc.poll() is None  # the first crawl goes on
        assert first.call("POST", "/api/stop")[0] == 200
        assert first.wait(60) == 0
    finally:
        first.kill()
    assert second.returncode == 1, second.stderr[-3000:]
    errors = [line for line in second.stderr.splitlines() if "] ERROR:" in line]
    assert len(errors) == 1, second.stderr[-3000:]
    assert str(first.jobdir) in errors[0] and "another crawl" in errors[0], errors
    assert "SegmentFifo" not in second.stderr and "Traceback" not in second.stderr
