"""File descriptors and connections bounded (#35, point 4): a crawl of 2,000 hosts under a
256-descriptor limit finishes with every page, and a write to the frontier that still fails
closes the crawl in one line."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.marks import require_crawl_marker
from testweb import manyhosts

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
FIRST_IP = "127.25.0.1"  # the scale helper's loopback range (127.25.0.0/16 - 127.28.0.0/16)


def limit_fds(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child's soft descriptor limit (the child has one thread then)."""

    def preexec() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    return preexec


def run_limited(
    tmp_path: Path,
    *,
    hosts: int,
    pages: int,
    fd_limit: int,
    timeout: float,
    settings: dict[str, object] | None = None,
    hosts_per_ip: int = 1,
) -> tuple[int, str, dict, list, int]:
    """Serve the many-host web, crawl it under ``fd_limit`` descriptors; (exit code, log,
    stats, the server's request log, port). A crawl still running at ``timeout`` fails."""
    require_crawl_marker("a crawl subprocess")
    served = manyhosts.served(tmp_path, hosts, pages, FIRST_IP, hosts_per_ip)
    with served as (port, seeds, env):
        out = tmp_path / "out"
        out.mkdir()
        base = {
            "JOBDIR": tmp_path / "job",
            "LARBIN_STATS_FILE": out / "stats.json",
            "DOWNLOAD_DELAY": 0,
        }
        cmd = manyhosts.crawl_command(seeds, {**base, **(settings or {})})
        with open(out / "crawl.log", "w") as log:
            crawl = subprocess.Popen(
                cmd,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                preexec_fn=limit_fds(fd_limit),  # noqa: PLW1509
            )
            try:
                crawl.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                crawl.kill()
                crawl.wait()
                text = (out / "crawl.log").read_text(errors="replace")
                raise AssertionError(
                    f"the crawl was still running after {timeout} s (stuck?):\n" + text[-4000:]
                ) from None
        stats_path = out / "stats.json"
        stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
        text = (out / "crawl.log").read_text(errors="replace")
    records = manyhosts.read_log(tmp_path / "web" / manyhosts.LOG)
    return crawl.returncode, text, stats, records, port


@pytest.mark.crawl
def test_2000_hosts_under_256_descriptors_finish_with_every_page(tmp_path: Path) -> None:
    hosts, pages = 2000, 2
    code, log, stats, records, port = run_limited(
        tmp_path, hosts=hosts, pages=pages, fd_limit=256, timeout=600, hosts_per_ip=10
    )
    assert code == 0, log[-4000:]
    assert "Unhandled error in Deferred" not in log
    assert stats.get("finish_reason") == "finished", stats
    summary = manyhosts.summary(records, port)
    fetched = summary["pages"]
    missing = manyhosts.ground_truth(hosts, pages, port) - fetched
    assert not missing, f"{len(missing)} pages never fetched, e.g. {sorted(missing)[:5]}"


@pytest.mark.crawl
def test_out_of_descriptors_never_leaves_a_live_process_doing_nothing(tmp_path: Path) -> None:
    """No cap on connections (set far above the limit): the OS refuses descriptors to the
    frontier too. The crawl slows and goes on, or closes with ``jobdir_error`` in one line;
    it never hangs (it did: the failure path itself needed a descriptor)."""
    hosts, pages = 2000, 2
    code, log, stats, records, port = run_limited(
        tmp_path,
        hosts=hosts,
        pages=pages,
        fd_limit=256,
        timeout=600,
        hosts_per_ip=10,
        settings={"LARBIN_FETCH_CONNECTIONS_MAX": 100_000},
    )
    # no traceback through the frontier or the failure path (other periodic writers, the stats
    # file's, may still log one of their own: not this test's subject)
    assert "larbinscrapy/frontier/" not in log and "larbinscrapy/fatal.py" not in log, log[-4000:]
    if stats.get("finish_reason") == "finished":
        assert code == 0
        fetched = manyhosts.summary(records, port)["pages"]
        assert fetched == manyhosts.ground_truth(hosts, pages, port)
    else:
        assert stats.get("finish_reason") == "jobdir_error", stats
        assert code != 0
        lines = [line for line in log.splitlines() if "ERROR: larbin: job directory" in line]
        assert len(lines) == 1, lines
