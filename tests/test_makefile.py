"""Each make target installs what its command needs, and no more: ``make -n`` (nothing run)
against a virtualenv whose stamp files say what is already installed."""

from __future__ import annotations

import os
import subprocess
import time
from typing import TYPE_CHECKING

from tests.support.crawl import ROOT

if TYPE_CHECKING:
    from pathlib import Path

RUNTIME = "pip install --quiet -e .\n"
TEST = 'pip install --quiet -e ".[test]"'
BENCH = 'pip install --quiet -e ".[bench]"'


def _plan(venv: Path, target: str) -> str:
    """The commands ``make TARGET`` would run with ``VENV=venv`` (printed, not run)."""
    result = subprocess.run(
        ["make", "-n", f"VENV={venv}", target], cwd=ROOT, text=True, capture_output=True, check=True
    )
    return result.stdout


def _stamp(venv: Path, *parts: str) -> None:
    venv.mkdir(exist_ok=True)
    later = time.time() + 60  # newer than pyproject.toml and setup.py
    for part in parts:
        path = venv / f".installed-{part}"
        path.touch()
        os.utime(path, (later, later))


def test_crawl_and_demo_install_the_runtime_only(tmp_path: Path):
    venv = tmp_path / "venv"
    for target in ("crawl", "demo"):
        plan = _plan(venv, target)
        assert RUNTIME in plan and TEST not in plan and BENCH not in plan, plan


def test_test_and_lint_add_the_test_extra_to_an_installed_runtime(tmp_path: Path):
    venv = tmp_path / "venv"
    _stamp(venv, "runtime")
    assert "pip install" not in _plan(venv, "crawl")  # installed: nothing to do
    for target in ("test", "lint"):
        plan = _plan(venv, target)
        assert TEST in plan and RUNTIME not in plan and BENCH not in plan, plan
    _stamp(venv, "test")
    assert "pip install" not in _plan(venv, "lint")
    plan = _plan(venv, "bench-quick")
    assert BENCH in plan and TEST not in plan, plan


def test_a_changed_pyproject_reinstalls_each_part(tmp_path: Path):
    venv = tmp_path / "venv"
    _stamp(venv, "runtime", "test")
    earlier = (ROOT / "pyproject.toml").stat().st_mtime - 60
    for path in (venv / ".installed-runtime", venv / ".installed-test"):
        os.utime(path, (earlier, earlier))  # older than pyproject.toml
    plan = _plan(venv, "test")
    assert RUNTIME in plan and TEST in plan, plan
