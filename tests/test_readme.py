"""The README's promises that can drift: the two first commands (the settings reference is
docs/settings.md, checked by tests/test_settings_reference.py)."""

from __future__ import annotations

from tests.support.crawl import ROOT


def test_readme_starts_with_the_two_commands():
    commands = [
        line.split("#")[0].strip()
        for line in (ROOT / "README.md")
        .read_text()
        .split("```sh", 1)[1]
        .split("```", 1)[0]
        .splitlines()
        if line.strip()
    ]
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
