"""A crawl that says what it does with its ``JOBDIR`` (issue 34, point 6): running a finished
crawl again says it is complete in one line, ``-O`` does not empty the items of a crawl kept in
a ``JOBDIR``. Real crawls of the test web on loopback."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT, crawl_command, run_crawl, seeds_args

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

pytestmark = pytest.mark.crawl


def _overwrite_run(web: RunningWeb, out: Path, settings: dict) -> subprocess.CompletedProcess[str]:
    """The same crawl with ``-O`` (overwrite the items file) instead of ``-o``."""
    cmd = crawl_command(web, out, *seeds_args(web.seeds), settings=settings)
    cmd[cmd.index("-o")] = "-O"
    return subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_a_finished_crawl_run_again_says_so_and_minus_O_keeps_its_items(web, tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job")}
    out = tmp_path / "out"
    first = run_crawl(web, out, *seeds_args(web.seeds), settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats["finish_reason"] == "finished"
    assert "this crawl is complete" not in first.stderr
    items = (out / "items.jsonl").read_bytes()
    assert items

    again = run_crawl(web, out, *seeds_args(web.seeds), settings=settings)
    assert again.returncode == 0, again.stderr[-3000:]
    said = [line for line in again.stderr.splitlines() if "this crawl is complete" in line]
    assert len(said) == 1, again.stderr[-3000:]
    assert str(tmp_path / "job") in said[0]
    assert again.fetched(web.port) == set()

    # -O on that JOBDIR: refused in one line, exit 1, the items file as it was
    refused = _overwrite_run(web, out, settings)
    assert refused.returncode == 1, refused.stderr[-3000:]
    lines = [line for line in refused.stderr.splitlines() if "ERROR" in line]
    assert len(lines) == 1 and "-O" in lines[0] and str(tmp_path / "job") in lines[0], lines
    assert "Traceback" not in refused.stderr
    assert (out / "items.jsonl").read_bytes() == items

    # -O with a fresh JOBDIR is a fresh crawl: allowed
    fresh = _overwrite_run(web, tmp_path / "out2", {"JOBDIR": str(tmp_path / "job2")})
    assert fresh.returncode == 0, fresh.stderr[-3000:]
