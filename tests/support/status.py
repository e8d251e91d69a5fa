"""Helpers of the status-page tests: a crawl subprocess with its page, and calls to its API."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests.support.crawl import ROOT, crawl_command
from testweb.harness import SITE_FILES, RunningWeb, free_port

if TYPE_CHECKING:
    from pathlib import Path

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def port_range(width: int = 30) -> str:
    """A range starting at a port free right now: the crawl takes the first one still free."""
    first = min(free_port(), 65535 - width)
    return f"{first},{first + width}"


class LiveCrawl:
    """``scrapy crawl larbin`` of the test web in the background, with its status page."""

    def __init__(
        self,
        web: RunningWeb,
        out: Path,
        *args: str,
        settings: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.web = web
        self.out = out
        self.jobdir = out / "job"
        merged = {
            "JOBDIR": str(self.jobdir),
            "LARBIN_STATUS_PORT": port_range(),
            "LARBIN_URLS": ",".join(web.seeds),
            **(settings or {}),
        }
        cmd = crawl_command(web, out, *args, settings=merged)
        self.log_file = open(out / "stderr.log", "a")  # noqa: SIM115 (closed in wait())
        self.started = time.time()
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        )
        self.address, self.token = self._wait_for_page()

    def _wait_for_page(self, timeout: float = 30) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        address = self.jobdir / "http-address"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"crawl exited {self.proc.returncode}:\n{self.log()[-3000:]}")
            if address.exists() and (self.jobdir / "http-token").exists():
                text = address.read_text().strip()
                if text:
                    return text, (self.jobdir / "http-token").read_text().strip()
            time.sleep(0.05)
        raise AssertionError("no status page after 30 s:\n" + self.log()[-3000:])

    def log(self) -> str:
        if not self.log_file.closed:
            self.log_file.flush()
        return (self.out / "stderr.log").read_text()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = "",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        """(status, decoded body) of one API call; ``token=None`` sends none, "" the right one."""
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token or self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        elif method == "POST":
            data = b""
        request = urllib.request.Request(
            self.address + path, data=data, headers=hdrs, method=method
        )
        try:
            with _OPENER.open(request, timeout=30) as response:
                return response.status, _decode(response.read(), response.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, _decode(exc.read(), exc.headers)

    def status(self) -> dict[str, Any]:
        code, doc = self.call("GET", "/api/status")
        assert code == 200, doc
        return doc

    def requests(self) -> list[dict[str, Any]]:
        """The test web's log of this and earlier runs."""
        return self.web.read_log()

    def wait_until(self, predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{what} (not within {timeout} s):\n{self.log()[-3000:]}")

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.log_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log_file.close()


def fetched_before_a_priority_url(web: RunningWeb, crawl: LiveCrawl) -> list[str]:
    """Add a URL with ``priority`` to the site with most still queued, through ``crawl``'s API;
    the paths of that site fetched after the call and before the URL (its next slot: <= 1)."""
    truth = Counter(urlsplit(u).hostname for u in web.web.ground_truth(web.seeds, depth=5))
    crawl.wait_until(lambda: len(web.read_log()) >= 30, 60, "the crawl did not start")
    served = Counter(e["host"] for e in web.read_log() if e["path"] not in SITE_FILES)
    host = max(truth, key=lambda h: truth[h] - served[h])  # the site with most still queued
    assert truth[host] - served[host] >= 6, "no site with a loaded queue"
    added = f"http://{host}:{web.port}/added-with-priority"
    code, answer = crawl.call("POST", "/api/urls", {"urls": [added], "priority": True})
    assert code == 200 and answer["queued"] == 1, answer
    asked = time.time()
    crawl.wait_until(
        lambda: any(e["path"] == "/added-with-priority" for e in web.read_log()),
        30,
        "the added URL was not fetched",
    )
    log = [
        e["path"]
        for e in web.read_log()
        if e["t"] >= asked and e["host"] == host and e["path"] not in SITE_FILES
    ]
    return log[: log.index("/added-with-priority")]


def _decode(raw: bytes, headers: Any) -> Any:
    if "json" in (headers.get("Content-Type") or ""):
        return json.loads(raw)
    return raw.decode("utf-8", "replace")
