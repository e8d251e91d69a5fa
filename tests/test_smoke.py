"""The project's settings are the ones Scrapy reads, and a crawl of the test web works."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.support.crawl import ROOT, run_crawl, seeds_args

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


def test_scrapy_reads_our_settings_package(tmp_path):
    # A top-level package named "settings" can be shadowed by any other module of that name:
    # run from the repo root as users do and check Scrapy sees ours.
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", "BOT_NAME"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "larbinscrapy"
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "settings", "--get", "SCHEDULER"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "larbinscrapy.frontier.scheduler.LarbinScheduler"


def test_crawl_of_test_web_equals_ground_truth(web, tmp_path):
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(web.seeds))
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=5)
    assert crawl.fetched(web.port) == truth
    assert crawl.stats["finish_reason"] == "finished"


def test_make_demo_crawls_the_test_web_to_its_ground_truth(tmp_path):
    # `make demo` is the README's no-internet walk-through; `--once` (the quick mode, which ends
    # by itself) must end with the oracle's verdict.
    demo = [sys.executable, "-m", "testweb.demo", "--once", "--out", str(tmp_path)]
    result = subprocess.run(
        demo,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "missing 0, unexpected 0" in result.stdout
    # and nothing a newcomer would stop at: the test web's 500 page and 404s are counted, not logged
    alarms = re.findall(r"\] (?:WARNING|ERROR|CRITICAL): .*", result.stdout + result.stderr)
    assert alarms == []
