"""The Scrapy commands a user tries first: ``scrapy parse`` on one page, ``scrapy addurls``
with no crawl running. Loopback only: the test web, a port nobody listens on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT
from testweb.harness import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb


def _scrapy(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.crawl
def test_parse_shows_the_page_item_and_the_requests_the_gate_lets_through(web: RunningWeb):
    url = web.web.url("h00.test", "/kinds/a/b/page.html")
    result = _scrapy(
        "parse",
        "--spider",
        "larbin",
        "--nocolour",
        "-s",
        "LARBIN_RESOLVE=" + json.dumps(web.resolve),
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        url,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    items, _, requests = out.partition("# Requests")
    assert f"'url': '{url}'" in items
    assert "'title': 'Every kind of relative link'" in items
    assert "'body'" not in items  # the item as a feed stores it
    linked = set(re.findall(r"'(http://[^']+)'", items.split("'links':", 1)[1]))
    queued = set(re.findall(r"<GET (\S+)>", requests))
    too_long = {u for u in linked if "/long/" in u}
    # The gate ran: the URL filters dropped the too-long link, the seen test the page itself
    # (its link "#top"), every other link is a request.
    assert too_long and url in linked
    assert queued == linked - too_long - {url}
    assert web.web.url("h00.test", "/kinds/a/b/sibling.html") in queued


def test_addurls_without_a_running_crawl_exits_1_with_one_line(tmp_path: Path):
    jobdir = tmp_path / "job"  # a crawl's JOBDIR, the crawl not running
    jobdir.mkdir()
    result = _scrapy("addurls", "http://h00.test/", "--jobdir", str(jobdir))
    assert result.returncode == 1, result
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and str(jobdir) in lines[0] and "running" in lines[0], lines
    # A status page address that nobody answers at: the same.
    result = _scrapy(
        "addurls", "http://h00.test/", "--url", f"http://127.0.0.1:{free_port()}/#token=abc"
    )
    assert result.returncode == 1, result
    assert "is it running?" in result.stdout
    # A usage mistake (which crawl?) stays Scrapy's usage error, exit 2.
    result = _scrapy("addurls", "http://h00.test/")
    assert result.returncode == 2
