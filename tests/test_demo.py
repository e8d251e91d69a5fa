"""``make demo``: the test web and a crawl of it stay up, with the status page's address and
token printed, until Ctrl-C; the crawl's log has no WARNING or ERROR a newcomer would wonder about.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from typing import TYPE_CHECKING

import pytest

from tests.support.crawl import ROOT

if TYPE_CHECKING:
    from pathlib import Path

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_ALARMS = re.compile(r"^\S+ \S+ \[[^]]+\] (WARNING|ERROR|CRITICAL): .*$", re.MULTILINE)


def _status(address: str, token: str) -> dict:
    request = urllib.request.Request(
        f"{address}/api/status", headers={"Authorization": f"Bearer {token}"}
    )
    with _OPENER.open(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.crawl
def test_demo_keeps_the_status_page_up_until_ctrl_c(tmp_path: Path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "testweb.demo", "--out", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    output: list[str] = []
    deadline = time.monotonic() + 90

    def read_until(pattern: str) -> re.Match[str]:
        while time.monotonic() < deadline:
            try:
                output.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "".join(output)[-3000:]
                continue
            if found := re.search(pattern, output[-1]):
                return found
        raise AssertionError(f"no {pattern!r}:\n" + "".join(output)[-3000:])

    try:
        address, token = read_until(r"^\s+Status page: (http://\S+)/#token=(\S+)$").groups()
        read_until(rf"API token: {token} ")
        while _status(address, token)["pages"] < 20:  # the crawl runs, the page shows it
            assert time.monotonic() < deadline, "".join(output)[-3000:]
            time.sleep(0.5)
        time.sleep(2)
        assert proc.poll() is None  # still up, whatever the crawl has left to do
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in the terminal reaches the whole group
        try:
            assert proc.wait(timeout=60) == 0
        except subprocess.TimeoutExpired:
            time.sleep(0.2)
            output.extend(lines.get() for _ in range(lines.qsize()))
            raise AssertionError("no exit 60 s after Ctrl-C:\n" + "".join(output)[-5000:]) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(0.2)  # the reader thread drains the pipe
    while not lines.empty():
        output.append(lines.get())
    text = "".join(output)
    assert re.search(r"\d+ distinct URLs fetched, \d+ items in", text), text[-3000:]
    assert _ALARMS.findall(text) == [], _ALARMS.findall(text)
