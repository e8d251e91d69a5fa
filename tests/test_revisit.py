"""Continuous crawls of the changing web (``testweb/changing.py``), time scaled to seconds.

The rule runs with a streak of 2 and a 1 s first interval, so a page that never changes is
asked again after 1, 1, 2, 2, 4 s and one that always changes after 1, 1, 0.5, 0.5, 0.25 s.
Everything is checked from the server's request log: when each URL was requested, with which
conditional headers, and what it answered. Timing assertions are lower bounds ("never before
due") plus a generous upper bound on the doubled/halved intervals, which hold on a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Any

import pytest

from larbinscrapy.revisit.rule import RevisitRule
from tests.support.crawl import ROOT, crawl_command, run_crawl, seeds_args
from tests.support.revisit import EARLY, RULE, by_page, gaps
from testweb.changing import REVISIT_HOSTS, start_changing

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


@pytest.fixture
def changing(tmp_path: Path):
    with start_changing(tmp_path / "web", period=3.0) as running:
        yield running


def test_intervals_double_for_unchanged_pages_and_halve_for_changing_ones(changing, tmp_path):
    crawl = run_crawl(
        changing,
        tmp_path / "out",
        *seeds_args(changing.seeds),
        settings={**RULE, "CLOSESPIDER_TIMEOUT": 12},
        timeout=60,
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "closespider_timeout" in crawl.stderr
    pages = by_page(crawl.requests)
    assert len(pages) == 4 * 11  # every page of every host, the index included
    expected_never = [1, 1, 2, 2, 4]
    for key, records in pages.items():
        kind = key.split("/")[1] or "never"
        got = gaps(records)
        if kind in ("never", "lmonly", "plain"):  # unchanged: 1, 1, then doubled, doubled again
            assert len(got) >= 5, (key, got)
            for gap, due in zip(got, expected_never, strict=False):
                assert gap >= due - EARLY, (key, got)
                assert gap < due + 1.5, (key, got)  # doubled, not more (a loaded machine: +1.5 s)
        if kind == "always":  # changed every time: 1, 1, then halved twice, down to the minimum
            assert len(got) >= 12, (key, got)
            for gap, due in zip(got, [1, 1, 0.5, 0.5, 0.25, 0.25, 0.25], strict=False):
                assert gap >= due - EARLY, (key, got)
            later = sorted(got[4:])  # halved twice (0.25 s): without halving they stay at 1 s
            assert later[len(later) // 2] < 0.75, (key, got)
    # conditional headers on every revisit of a page with validators; a 304 is headers only
    for key, records in pages.items():
        kind = key.split("/")[1] or "never"
        first, revisits = records[0], records[1:]
        assert first["inm"] is None and first["ims"] is None
        for r in revisits:
            if kind in ("never", "always", "periodic", ""):
                assert r["inm"] is not None, (key, r)
            if kind == "lmonly":
                assert r["ims"] is not None and r["inm"] is None, (key, r)
            if kind == "plain":
                assert r["ims"] is None and r["inm"] is None, (key, r)
            if kind in ("never", "lmonly"):
                assert r["status"] == 304 and r["bytes"] == 0, (key, r)
            if kind == "always":
                assert r["status"] == 200
    # items: a 304 is an item with changed=False; a changed page's items say so
    items = crawl.items
    not_modified = [i for i in items if i["status"] == 304]
    assert not_modified and all(
        i["changed"] is False and i["fetch_count"] > 1 for i in not_modified
    )
    always = [i for i in items if "/always/" in i["url"]]
    assert all(i["changed"] is True for i in always)
    assert max(i["fetch_count"] for i in always) >= 12
    stats = crawl.stats
    assert stats["larbin/revisit/not_modified"] == len(not_modified)
    saved = sum(r["bytes"] for rs in pages.values() for r in rs[:1] if "/never/" in r["path"])
    assert saved > 0


def test_one_pass_crawl_is_unchanged_without_revisit(changing, tmp_path):
    crawl = run_crawl(
        changing,
        tmp_path / "out",
        *seeds_args(changing.seeds),
        settings={"CLOSESPIDER_TIMEOUT": 20},
        timeout=60,
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "finished" in crawl.stderr
    pages = by_page(crawl.requests)
    assert len(pages) == 44 and all(len(r) == 1 for r in pages.values())
    assert all("changed" not in i and "fetch_count" not in i for i in crawl.items)


def expected_next(records: list[dict[str, Any]], rule: RevisitRule) -> float:
    """When the page is due after these fetches, by the rule (the log says what changed)."""
    interval, streak = rule.first(), 0
    for r in records[1:]:
        changed = r["status"] == 200 and ("/always/" in r["path"] or "/periodic/" in r["path"])
        interval, streak = rule.update(interval, streak, changed)
    return records[-1]["t"] + interval


def test_kill_9_keeps_every_schedule_and_fetches_nothing_early(changing, tmp_path):
    settings = {**RULE, "JOBDIR": str(tmp_path / "job"), "LARBIN_REVISIT_INTERVAL_MAX": 4.0}
    out1 = tmp_path / "run1"
    out1.mkdir()
    cmd = crawl_command(changing, out1, *seeds_args(changing.seeds), settings=settings)
    with open(out1 / "stderr.log", "w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=err,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        deadline = time.monotonic() + 40
        # kill once every page was fetched at least three times (a schedule well under way)
        while True:
            pages = by_page(changing.read_log())
            if len(pages) == 44 and min(len(r) for r in pages.values()) >= 3:
                break
            assert proc.poll() is None, (out1 / "stderr.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the crawl is too slow"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = by_page(changing.read_log())
    log_len = len(changing.read_log())
    time.sleep(1.0)
    crawl = run_crawl(
        changing,
        tmp_path / "run2",
        *seeds_args(changing.seeds),
        settings={**settings, "CLOSESPIDER_TIMEOUT": 8},
        timeout=60,
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    after = by_page(changing.read_log()[log_len:])
    rule = RevisitRule(1.0, 0.25, 4.0, 2, 2.0)
    assert set(after) == set(before)  # every page still has its schedule: fetched again
    early = []
    for key, records in before.items():
        due = expected_next(records, rule)
        first_again = after[key][0]["t"]
        if first_again < due - EARLY:
            early.append((key, due - first_again))
    # in flight at the kill: fetched, not yet recorded; one connection per IP
    assert len(early) <= len(REVISIT_HOSTS), early
    for key, records in after.items():  # and nothing starts from scratch: revisits only
        assert records[0]["inm"] is not None or records[0]["ims"] is not None or "/plain/" in key
    assert json.loads((tmp_path / "run2" / "stats.json").read_text())["larbin/revisit/due"] > 0


def test_a_corrupt_schedule_stops_the_crawl_with_one_line(changing, tmp_path):
    job = tmp_path / "job"
    (job / "revisit").mkdir(parents=True)
    (job / "revisit" / "checkpoint").write_bytes(b'{"epoch": 1}\n' + b"\0" * 8)
    crawl = run_crawl(
        changing,
        tmp_path / "out",
        *seeds_args(changing.seeds),
        settings={**RULE, "JOBDIR": str(job)},
        timeout=60,
    )
    assert "revisit: cannot open the schedule" in crawl.stderr and "CRC" in crawl.stderr
    assert crawl.returncode != 0 and not crawl.requests  # refused before fetching anything
    assert "Traceback" not in crawl.stderr
