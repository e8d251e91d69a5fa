"""``scrapy crawl larbin`` of a test web in a subprocess: its command, a run to the end or to a
stop point, and what it left behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from settings import base
from tests.support.marks import require_crawl_marker
from testweb.harness import page_counts, pages, sitemap_counts

if TYPE_CHECKING:
    from collections import Counter

    from testweb.harness import RunningWeb

ROOT = Path(__file__).resolve().parents[2]

# Every LARBIN_* setting at its default: what a component built from a bare crawler reads.
LARBIN_DEFAULTS = {k: v for k, v in vars(base).items() if k.startswith("LARBIN_")}


def settings_of(module: Any, **overrides: Any) -> dict[str, Any]:
    """A settings profile (``settings.base``, ``settings.distributed``) as a dict, overridden."""
    return {**{k: v for k, v in vars(module).items() if k.isupper()}, **overrides}


def seeds_args(urls: list[str]) -> list[str]:
    """The spider arguments that crawl ``urls`` as seeds."""
    return ["-a", "urls=" + ",".join(urls)]


@dataclass
class Crawl:
    """What a finished ``scrapy crawl larbin`` run left behind."""

    returncode: int
    stderr: str
    items: list[dict[str, Any]]
    stats: dict[str, Any]
    requests: list[dict[str, Any]] = field(default_factory=list)  # the web's log for this run

    def fetched(self, port: int) -> set[str]:
        """URLs requested from the server during the run (robots.txt, /sitemap.xml set apart)."""
        return pages(self.requests, port)

    def fetch_counts(self, port: int) -> Counter[str]:
        return page_counts(self.requests, port)

    def sitemap_counts(self, port: int) -> Counter[str]:
        """How often each site's /sitemap.xml was requested during the run."""
        return sitemap_counts(self.requests, port)


def crawl_command(
    web: RunningWeb, out: Path, *args: str, settings: dict[str, Any] | None = None
) -> list[str]:
    """The command line of a crawl of ``web``; ``args`` are extra ``-a``/``-s`` words."""
    require_crawl_marker("a crawl subprocess")
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-s",
        "LARBIN_RESOLVE=" + json.dumps(web.resolve),
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        f"LARBIN_STATS_FILE={out / 'stats.json'}",
        "-s",
        "LOG_LEVEL=INFO",
        "-o",
        str(out / "items.jsonl"),
    ]
    merged = {"DOWNLOAD_DELAY": 0, **(settings or {})}
    for key, value in merged.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd + list(args)


def run_crawl(
    web: RunningWeb,
    out: Path,
    *args: str,
    settings: dict[str, Any] | None = None,
    timeout: float = 120,
) -> Crawl:
    """Run a crawl to the end."""
    out.mkdir(parents=True, exist_ok=True)
    log_start = len(web.read_log())
    cmd = crawl_command(web, out, *args, settings=settings)
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=err,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(
                f"crawl did not finish in {timeout}s:\n" + (out / "stderr.log").read_text()[-3000:]
            ) from None
    stderr = (out / "stderr.log").read_text()
    items_path = out / "items.jsonl"
    items = (
        [json.loads(line) for line in items_path.read_text().splitlines() if line.strip()]
        if items_path.exists()
        else []
    )
    stats_path = out / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    return Crawl(proc.returncode, stderr, items, stats, web.read_log()[log_start:])


def clean_copy(dest: Path) -> Path:
    """The files a fresh clone of the working tree holds: tracked plus untracked-not-ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, dest / name)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # for `git check-ignore` only
    return dest
