"""Start-up cost: a default crawl does not import what only its switched-off features need.

Scrapy imports the class of every component named in its settings dicts, so a component that is
off by default must defer its heavy dependencies until its setting turns it on (issue #18: a
fifth of larbinscrapy's CPU on the benchmark's small web was start-up). Each test runs a real
``scrapy crawl larbin`` of the test web, closed after its first page, under a wrapper that
writes the process's ``sys.modules`` at exit; the same crawl with the features on shows the
check can fail and that each feature still loads and works when asked for. The default crawl
also freezes its start-up objects (``LARBIN_GC_FREEZE``, ``larbinscrapy/lean/gcfreeze.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT, crawl_command, seeds_args
from testweb.harness import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

# `python -c WRAPPER crawl larbin ...`: Scrapy's own entry point, then at exit the objects the
# collector has frozen and sys.modules, one name a line.
pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

WRAPPER = (
    "import atexit, gc, os, runpy, sys\n"
    "atexit.register(lambda: open(os.environ['LARBIN_TEST_MODULES'], 'w')"
    ".write('\\n'.join([str(gc.get_freeze_count()), *sorted(sys.modules)])))\n"
    "sys.argv = ['scrapy', *sys.argv[1:]]\n"
    "runpy.run_module('scrapy', run_name='__main__', alter_sys=True)\n"
)

# Imported by a default crawl only if a feature that is off (or idle) were paying for itself.
OFF_BY_DEFAULT = {
    "prometheus_client": "the status page's /metrics (only when scraped)",
    "twisted.web.server": "the status page's web site (only once someone connects)",
    "larbinscrapy.status.web": "the status page's routes (only once someone connects)",
    "warcio": "LARBIN_WARC",
    "sqlite3": "LARBIN_SQLITE_PATH (the docs/pipelines.md example)",
    "larbinscrapy.revisit.store": "LARBIN_REVISIT",
    "twisted.conch": "TELNETCONSOLE_ENABLED",
    "redis": "the distributed profile",
    "scrapy_redis": "the distributed profile",
    "larbinscrapy.distributed": "the distributed profile",
    "playwright": "never: tests only",
    "hypothesis": "never: tests only",
}


def crawl_modules(web: RunningWeb, out: Path, **settings: object) -> tuple[set[str], int, str]:
    """Run a one-page crawl of ``web``: the modules its process had imported at exit, how many
    objects were frozen then, and its log."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = crawl_command(
        web, out, *seeds_args(web.seeds), settings={"CLOSESPIDER_PAGECOUNT": 1, **settings}
    )
    assert cmd[1:3] == ["-m", "scrapy"]
    modules = out / "modules.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LARBIN_TEST_MODULES": str(modules)}
    result = subprocess.run(
        [cmd[0], "-c", WRAPPER, *cmd[3:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    items = (out / "items.jsonl").read_text().splitlines()
    assert items and json.loads(items[0])["status"] == 200
    frozen, *names = modules.read_text().split()
    return set(names), int(frozen), result.stderr


def loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_default_crawl_imports_nothing_for_features_that_are_off(web, tmp_path):
    modules, frozen, _ = crawl_modules(web, tmp_path / "default")
    assert "larbinscrapy.status.extension" in modules  # the status page is on, only idle
    wrongly = {name: why for name, why in OFF_BY_DEFAULT.items() if loaded(modules, name)}
    assert not wrongly, f"imported by a default crawl: {wrongly}"
    # LARBIN_GC_FREEZE: the start-up objects (Scrapy, Twisted, our components) left the GC's way
    assert frozen > 20_000


def test_the_same_features_turned_on_load_and_work(web, tmp_path):
    out = tmp_path / "on"
    port = free_port()
    modules, frozen, log = crawl_modules(
        web,
        out,
        LARBIN_WARC=True,
        LARBIN_WARC_DIR=out / "warc",
        LARBIN_SQLITE_PATH=out / "pages.db",
        LARBIN_REVISIT=True,
        LARBIN_GC_FREEZE=False,
        TELNETCONSOLE_ENABLED=True,
        TELNETCONSOLE_PORT=f"{port},{port + 20}",
    )
    for name in ("warcio", "sqlite3", "larbinscrapy.revisit.store", "twisted.conch"):
        assert loaded(modules, name), name
    assert list((out / "warc").glob("*.warc.gz"))
    with sqlite3.connect(out / "pages.db") as db:
        assert db.execute("SELECT count(*) FROM pages").fetchone()[0] >= 1
    assert frozen == 0
    assert "Telnet console listening on 127.0.0.1:" in log
