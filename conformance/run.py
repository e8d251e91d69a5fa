"""``make conformance``: fetch the sdist of the installed Scrapy, run its tests of the parts
``larbinscrapy/lean/`` replaces against our classes (``suites.py``), and our robots.txt cases
written from Google's parser's tests (``OWN``), print pytest's totals."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import scrapy

from conformance.suites import SUITES

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "conformance" / ".cache"
KEEP = ("tests/", "conftest.py", "pyproject.toml")  # Scrapy's own package comes from the venv
OWN = (ROOT / "conformance" / "test_robotstxt_cases.py",)  # other references than Scrapy's


def sources(version: str) -> Path:
    """The tests of Scrapy ``version``'s sdist, downloaded once into the cache."""
    tree = CACHE / f"scrapy-{version}"
    if (tree / "tests").is_dir():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    sdist = CACHE / f"scrapy-{version}.tar.gz"
    if not sdist.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-binary",
                ":all:",
                "--no-deps",
                f"scrapy=={version}",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
    partial = CACHE / f"scrapy-{version}.partial"
    with tarfile.open(sdist) as tar:
        prefix = f"scrapy-{version}/"
        members = [
            m
            for m in tar.getmembers()
            if m.name.startswith(prefix) and m.name[len(prefix) :].startswith(KEEP)
        ]
        for member in members:
            member.name = member.name[len(prefix) :]
        tar.extractall(partial, members=members, filter="data")
    partial.rename(tree)
    return tree


def main(argv: list[str]) -> int:
    tree = sources(scrapy.__version__)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT)])}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "conformance.plugin",
        "-c",
        str(tree / "pyproject.toml"),
        "--rootdir",
        str(tree),
        "-m",
        "not requires_internet",
        "-q",
        "-p",
        "no:cacheprovider",
        "--timeout",
        "120",
        *(suite.module for suite in SUITES),
        *map(str, OWN),
        *argv,
    ]
    print(
        f"conformance: Scrapy {scrapy.__version__}'s tests against larbinscrapy/lean/", flush=True
    )
    return subprocess.run(cmd, cwd=tree, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
