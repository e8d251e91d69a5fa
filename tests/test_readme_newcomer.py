"""The README a newcomer reads top to bottom, and the guides it sends them to: short, with
contents that lead somewhere, links that exist, every ``scrapy`` command runnable as written
(from the virtualenv), the five things a broad crawl sets, and what each ``make`` installs."""

from __future__ import annotations

import re

from larbinscrapy.spiders.larbin import _read_seeds
from tests.support.crawl import ROOT

README = ROOT / "README.md"
GUIDES = [
    ROOT / "docs" / name for name in ("running.md", "politeness.md", "storage.md", "status.md")
]
# Written by the other parts of issue 27 (the settings reference, the add-on, the fast and the
# conformance test targets), in branches merged with this one.
ELSEWHERE = {"conformance"}  # made by `make conformance` (another branch)
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _sh_blocks(text: str) -> list[list[str]]:
    return [
        [line.strip() for line in block.split("```", 1)[0].splitlines() if line.strip()]
        for block in text.split("```sh")[1:]
    ]


def test_readme_is_short_and_its_contents_lead_to_its_sections():
    text = README.read_text()
    assert len(text.splitlines()) < 200
    anchors = {_anchor(h) for h in _HEADING.findall(text)}
    contents = text.split("**Contents:**", 1)[1].split("\n\n", 1)[0]
    targets = [t.removeprefix("#") for t in _LINK.findall(contents)]
    assert len(targets) >= 7 and set(targets) <= anchors, set(targets) - anchors


def test_links_of_the_readme_and_the_guides_exist():
    for doc in (README, *GUIDES):
        text = doc.read_text()
        anchors = {_anchor(h) for h in _HEADING.findall(text)}
        for target in _LINK.findall(text):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            if not path:
                assert anchor in anchors, (doc.name, target)
                continue
            resolved = (doc.parent / path).resolve()
            if str(resolved.relative_to(ROOT)) not in ELSEWHERE:
                assert resolved.exists(), (doc.name, target)


def test_every_scrapy_command_runs_from_the_virtualenv_as_written():
    # `scrapy` is in .venv/bin, not on PATH: a bare `scrapy` command must come after the page
    # said to activate the virtualenv (in the same block or above it).
    for doc in (README, *GUIDES):
        text = doc.read_text()
        for line in (line.strip() for line in text.splitlines()):
            if line.startswith("scrapy "):
                above = text[: text.index(line)]
                assert "source .venv/bin/activate" in above, (doc.name, line)
    assert ".venv/bin/scrapy crawl larbin" in README.read_text()


def test_readme_names_the_five_things_a_broad_crawl_sets():
    section = README.read_text().split("## Five things every broad crawl sets", 1)[1]
    section = section.split("\n## ", 1)[0]
    for words in (
        ["-a seeds="],
        ["USER_AGENT", "LARBIN_FROM"],
        ["JOBDIR"],
        ["-o "],
        ["DOWNLOAD_DELAY", "LARBIN_IP_DELAY"],
    ):
        assert all(w in section for w in words), words
    # and all of them in one command a newcomer can copy
    command = " ".join(_sh_blocks(section)[0])
    assert all(
        w in command
        for w in ("-a seeds=", "USER_AGENT=", "LARBIN_FROM=", "JOBDIR=", "-o ", "DOWNLOAD_DELAY=")
    )


def test_readme_says_what_each_make_target_installs_and_its_size():
    text = README.read_text()
    makefile = (ROOT / "Makefile").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `make ")]
    assert {"crawl", "test", "bench", "install"} <= {
        m for row in rows for m in re.findall(r"`make ([\w-]+)`", row)
    }
    assert all(re.search(r"\| \d+ MB \|$", row) for row in rows), rows
    for target in set(re.findall(r"`make ([\w-]+)", text)) - ELSEWHERE:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), target


def test_the_seeds_file_the_docs_name_for_scrapyd_ships_in_the_package():
    found = _read_seeds("package:larbinscrapy/seedlists/example.txt")
    assert found.urls and not found.errors
    running = (ROOT / "docs" / "running.md").read_text()
    assert "package:larbinscrapy/seedlists/example.txt" in running
