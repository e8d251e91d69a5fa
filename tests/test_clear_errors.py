"""A crawl that cannot go on says so in one line, exits non-zero and damages nothing on disk.

Real failures only: a Redis URL where nothing listens, a JOBDIR under a regular file, damaged
state files, another crawl holding the JOBDIR, and a JOBDIR on a tiny tmpfs that fills up
(``ENOSPC``; mounted in a private user and mount namespace, so no privilege is needed).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT, crawl_command, run_crawl
from testweb.harness import free_port

if TYPE_CHECKING:
    from pathlib import Path


pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


def _run(
    cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )


def _errors(log: str) -> list[str]:
    """ERROR and CRITICAL log lines, but for the test web's page that fails by design."""
    return [
        line
        for line in log.splitlines()
        if ("] ERROR:" in line or "] CRITICAL:" in line) and "Gave up retrying" not in line
    ]


def _assert_one_clear_line(log: str, *words: str) -> None:
    assert "Traceback" not in log, log[-3000:]
    errors = _errors(log)
    assert len(errors) == 1, errors or log[-3000:]
    for word in words:
        assert word in errors[0], (word, errors[0])


def test_unreachable_redis_is_one_line_naming_the_url(web, tmp_path):
    url = f"redis://127.0.0.1:{free_port()}/0"
    cmd = crawl_command(web, tmp_path, "-a", "urls=" + web.seeds[0], settings={"REDIS_URL": url})
    result = _run(cmd, env={"SCRAPY_SETTINGS_MODULE": "settings.distributed"})
    assert result.returncode != 0
    _assert_one_clear_line(result.stderr, url)


def test_jobdir_that_cannot_be_created_is_one_line(web, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    jobdir = blocker / "job"
    crawl = run_crawl(
        web, tmp_path / "out", "-a", "urls=" + web.seeds[0], settings={"JOBDIR": jobdir}
    )
    assert crawl.returncode != 0
    _assert_one_clear_line(crawl.stderr, str(jobdir))
    assert blocker.read_text() == "not a directory"


def _finished_jobdir(web, tmp_path: Path) -> Path:
    """A JOBDIR after a short crawl, stopped early so that its frontier still holds URLs."""
    jobdir = tmp_path / "job"
    crawl = run_crawl(
        web,
        tmp_path / "first",
        "-a",
        "urls=" + ",".join(web.seeds),
        settings={
            "JOBDIR": jobdir,
            "CLOSESPIDER_PAGECOUNT": 5,
            "LARBIN_DUPEFILTER_CAPACITY": 2_000,
        },
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    return jobdir


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_corrupt_dupefilter_snapshot_is_one_line_and_left_as_it_was(web, tmp_path):
    jobdir = _finished_jobdir(web, tmp_path)
    snapshot = jobdir / "dupefilter" / "snapshot"
    data = bytearray(snapshot.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    before = _snapshot(jobdir)
    crawl = run_crawl(
        web,
        tmp_path / "again",
        "-a",
        "urls=" + ",".join(web.seeds),
        settings={"JOBDIR": jobdir, "LARBIN_DUPEFILTER_CAPACITY": 2_000},
    )
    assert crawl.returncode != 0
    _assert_one_clear_line(crawl.stderr, str(snapshot))
    assert _snapshot(jobdir) == before  # not one byte of the job directory changed


def test_unreadable_frontier_checkpoint_is_one_line_and_left_as_it_was(web, tmp_path):
    jobdir = _finished_jobdir(web, tmp_path)
    state = next((jobdir / "frontier").rglob("state.json"))
    state.write_text(json.dumps({"format": 99}))
    before = _snapshot(jobdir)
    crawl = run_crawl(
        web,
        tmp_path / "again",
        "-a",
        "urls=" + ",".join(web.seeds),
        settings={"JOBDIR": jobdir, "LARBIN_DUPEFILTER_CAPACITY": 2_000},
    )
    assert crawl.returncode != 0
    _assert_one_clear_line(crawl.stderr, str(state))
    assert _snapshot(jobdir) == before


def test_full_jobdir_is_one_line_and_what_is_on_disk_still_resumes(web, tmp_path):
    # A 32 kB tmpfs as JOBDIR: the crawl fills it. It must stop with one line naming the
    # device error, exit non-zero, and leave a JOBDIR from which the crawl resumes and ends.
    mount, copy = tmp_path / "tmpfs", tmp_path / "copy"
    mount.mkdir()
    out = tmp_path / "full"
    out.mkdir()
    cmd = crawl_command(
        web,
        out,
        "-a",
        "urls=" + ",".join(web.seeds),
        settings={"JOBDIR": mount / "job", "LARBIN_DUPEFILTER_CAPACITY": 2_000},
    )
    script = (
        f"mount -t tmpfs -o size=32k none {shlex.quote(str(mount))} && "
        f"{shlex.join(cmd)}; rc=$?; cp -a {shlex.quote(str(mount / 'job'))} "
        f"{shlex.quote(str(copy))}; exit $rc"
    )
    result = _run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], timeout=120
    )
    assert result.returncode not in (0, 127), result.stderr[-3000:]
    _assert_one_clear_line(result.stderr, "No space left on device")
    resumed = run_crawl(
        web,
        tmp_path / "resumed",
        "-a",
        "urls=" + ",".join(web.seeds),
        settings={"JOBDIR": copy, "LARBIN_DUPEFILTER_CAPACITY": 2_000},
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Traceback" not in resumed.stderr
    assert resumed.stats.get("larbin/frontier/corrupt_records", 0) == 0
    assert resumed.stats["finish_reason"] == "finished"
    # the two runs together fetched the whole web: nothing queued before the failure was lost
    fetched = {f"http://{e['host']}:{web.port}{e['path']}" for e in web.read_log()}
    assert web.web.ground_truth(web.seeds, depth=5) <= fetched
