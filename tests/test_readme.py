"""The README's promises that can drift: the settings table and the two first commands."""

from __future__ import annotations

import importlib.util

from tests.support.crawl import ROOT


def _settings_table():
    spec = importlib.util.spec_from_file_location("settings_table",
                                                  ROOT / "docs" / "settings_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_settings_table_matches_settings_base():
    readme = (ROOT / "README.md").read_text()
    assert readme == _settings_table().readme_with_table(readme), (
        "README settings table is stale: run python docs/settings_table.py")


def test_every_larbin_setting_has_a_comment():
    missing = [name for name, _, comment in _settings_table().rows()
               if name.startswith("LARBIN_") and not comment]
    assert not missing


def test_readme_starts_with_the_two_commands():
    commands = [line.split("#")[0].strip() for line in
                (ROOT / "README.md").read_text().split("```sh", 1)[1].split("```", 1)[0]
                .splitlines() if line.strip()]
    assert commands[:2] == ["make crawl", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_ci_runs_the_lint_the_readme_lists():
    """The README's first block lists ``make lint`` beside ``make test``; CI runs both."""
    block = (ROOT / "README.md").read_text().split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert "make lint" in commands
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make lint" in ci_lines and "make test" in ci_lines
