"""docs/scrapyd.md's ``pip install`` for scrapyd's Python names every runtime dependency.

Its reader installs exactly that list where scrapyd runs (the project itself is not installed
there), so a dependency missing from it is an ``ImportError`` in the deployed crawl. The list
and ``pyproject.toml``'s ``dependencies`` must name the same packages with the same versions.
"""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.support.crawl import ROOT

SCRAPYD_ONLY = {"scrapyd", "setuptools"}  # scrapyd itself and its runner's pkg_resources


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _documented() -> dict[str, str]:
    text = (ROOT / "docs" / "scrapyd.md").read_text()
    command = re.search(r"^pip install (.*?)\n```", text, re.MULTILINE | re.DOTALL)
    assert command, "docs/scrapyd.md: no pip install block"
    words = shlex.split(command.group(1).replace("\\\n", " "))
    return {_name(w): w.replace(" ", "") for w in words if _name(w) not in SCRAPYD_ONLY}


def test_scrapyds_pip_install_names_every_dependency_with_its_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r): r.replace(" ", "") for r in project["dependencies"]}
    assert _documented() == wanted
