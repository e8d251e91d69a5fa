"""For tests that crawl ``benchmarks.synthweb`` (nginx) with ``scrapy crawl larbin``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testweb.synthweb import SynthWeb

ROOT = Path(__file__).resolve().parent.parent


def crawl_synthweb(web: SynthWeb, out: Path, settings: dict[str, object]) -> dict[str, object]:
    """``scrapy crawl larbin`` of ``web``'s seeds to the end; its stats."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        "urls=" + ",".join(web.seeds),
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        "DOWNLOAD_DELAY=0",
        "-s",
        f"LARBIN_STATS_FILE={out / 'stats.json'}",
        "-s",
        "LOG_LEVEL=INFO",
        "-o",
        str(out / "items.jsonl"),
    ]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    with open(out / "stderr.log", "w") as err:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            stdout=err,
            stderr=subprocess.STDOUT,
            timeout=180,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            check=False,
        )
    stderr = (out / "stderr.log").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    return json.loads((out / "stats.json").read_text())
