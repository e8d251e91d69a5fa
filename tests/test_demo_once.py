"""``make demo``'s self-check reads its own run only, and the crawl it starts takes the user's
settings (issue 34, point 6): ``python -m testweb.demo --once`` on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT
from testweb.harness import free_port

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl


def test_demo_checks_its_own_run_and_takes_settings(tmp_path: Path):
    # An old run's request log, as a previous `make demo` leaves it in output/demo/web/: a
    # request the ground truth never has. The check must not read it.
    log = tmp_path / "web" / "testweb-log.jsonl"
    log.parent.mkdir(parents=True)
    old = {"t": 0.0, "ip": "127.0.1.1", "host": "h00.test", "path": "/from-an-old-run.html"}
    log.write_text(json.dumps(old) + "\n")
    port = free_port()
    demo = [
        sys.executable,
        "-m",
        "testweb.demo",
        "--once",
        "--out",
        str(tmp_path),
        "-s",
        f"LARBIN_STATUS_PORT={port}",
        "-s",
        "LOG_LEVEL=INFO",
    ]
    result = subprocess.run(
        demo,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "missing 0, unexpected 0" in result.stdout
    # the status page listened where the user's setting said
    assert f"Status page: http://127.0.0.1:{port}/" in out, out[-3000:]
