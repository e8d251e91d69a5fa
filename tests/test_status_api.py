"""The status page's API against a real crawl subprocess of the test web (larbin httpPort).

Token, status document, URLs added through ``POST /api/urls`` and ``scrapy addurls`` (fetched,
seen at the server), the SSRF guard, pause (nothing reaches the server), resume, stop (exit 0,
resumable with JOBDIR), ``/metrics`` in Prometheus' format, two crawls side by side.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.crawl import ROOT, Crawl, run_crawl, seeds_args
from tests.support.resume import check_resumed, twice
from tests.support.status import LiveCrawl, port_range
from testweb.harness import ROBOTS, SITEMAP, RunningWeb, pages

if TYPE_CHECKING:
    from pathlib import Path


pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast


def test_token_status_urls_addurls_metrics(web: RunningWeb, tmp_path: Path) -> None:
    # A 1 s delay keeps the crawl running (~40 s) while three scrapy commands start up.
    crawl = LiveCrawl(web, tmp_path / "run", settings={"DOWNLOAD_DELAY": 1.0})
    try:
        log = crawl.log()
        assert log.count("Status page: ") == 1
        assert f"Status page: {crawl.address}/#token={crawl.token}" in log
        # Our log line instead of Scrapy's LogStats one.
        assert "; IPs ready " in log and "since the last line" in log
        assert "pages/min), scraped" not in log
        mode = stat.S_IMODE(os.stat(crawl.jobdir / "http-token").st_mode)
        assert mode == 0o600, oct(mode)

        # No token, a wrong one: 401 everywhere; ?token= works for a browser's first load.
        for method, path in (
            ("GET", "/api/status"),
            ("GET", "/metrics"),
            ("GET", "/api/history"),
            ("POST", "/api/pause"),
            ("POST", "/api/urls"),
        ):
            assert crawl.call(method, path, token=None)[0] == 401, path
            assert crawl.call(method, path, token="wrong" + crawl.token)[0] == 401, path
        assert crawl.call("GET", f"/api/status?token={crawl.token}", token=None)[0] == 200
        # State changes: POST only, and never from another site's page.
        assert crawl.call("GET", "/api/pause")[0] == 405
        code, _ = crawl.call("POST", "/api/pause", headers={"Origin": "http://evil.example"})
        assert code == 403
        assert crawl.status()["paused"] is False

        first = crawl.status()
        for key in ("pages", "items", "queued", "rates", "paused", "stats", "frontier", "ips"):
            assert key in first, key
        assert set(first["rates"]) >= {"pages_per_s", "bytes_per_s", "items_per_s"}
        assert set(first["frontier"]["fifos"]) == {
            "priority",
            "priority-overflow",
            "normal",
            "normal-overflow",
        }
        crawl.wait_until(
            lambda: crawl.status()["pages"] >= first["pages"] + 5, 30, "pages did not grow"
        )
        later = crawl.status()
        assert any(k.startswith("larbin/") for k in later["stats"])
        assert later["rates"]["pages_per_s"] > 0

        # POST /api/urls: a new URL is queued and fetched; private targets and bad URLs refused.
        port = web.port
        added = f"http://h03.test:{port}/added-by-api"
        code, answer = crawl.call(
            "POST",
            "/api/urls",
            {
                "urls": [
                    added,
                    "http://10.0.0.1/",
                    "http://169.254.169.254/latest/meta-data/",
                    "ftp://h01.test/x",
                    web.seeds[0],
                ],
                "priority": True,
            },
        )
        assert code == 200, answer
        assert (answer["queued"], answer["seen"], answer["refused"]) == (1, 1, 3), answer
        reasons = {r["url"]: r["reason"] for r in answer["refusals"]}
        assert reasons["http://10.0.0.1/"].startswith("ssrf")
        assert reasons["http://169.254.169.254/latest/meta-data/"].startswith("ssrf")
        assert "scheme" in reasons["ftp://h01.test/x"]
        crawl.wait_until(
            lambda: added in pages(crawl.requests(), port),
            20,
            "the URL added through the API was not fetched",
        )
        assert crawl.call("POST", "/api/urls", {"urls": "not a list"})[0] == 400
        huge = {"urls": ["http://h01.test/" + "x" * 1000] * 1100}  # over LARBIN_STATUS_BODY_MAX
        assert crawl.call("POST", "/api/urls", huge)[0] == 413
        assert crawl.call("GET", "/api/nothing")[0] == 404
        assert crawl.call("POST", "/api/urls", {"urls": [added], "depth": -1})[0] == 400

        # scrapy addurls: token and address from the job directory.
        by_command = f"http://h05.test:{port}/added-by-command"
        cmd = [
            sys.executable,
            "-m",
            "scrapy",
            "addurls",
            by_command,
            "--priority",
            "--depth",
            "0",
            "--jobdir",
            str(crawl.jobdir),
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "queued 1, already seen 0, refused 0" in done.stdout
        crawl.wait_until(
            lambda: by_command in pages(crawl.requests(), port),
            20,
            "the URL added by scrapy addurls was not fetched",
        )
        again = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert "queued 0, already seen 1" in again.stdout, again.stdout + again.stderr
        refused = subprocess.run(
            [
                sys.executable,
                "-m",
                "scrapy",
                "addurls",
                "http://192.168.1.1/",
                "--url",
                f"{crawl.address}/#token={crawl.token}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "refused http://192.168.1.1/: ssrf" in refused.stdout

        # /metrics: Prometheus text format, larbin_* names with HELP.
        code, text = crawl.call("GET", "/metrics")
        assert code == 200
        families = {f.name: f for f in text_string_to_metric_families(text)}
        assert families and all(name.startswith("larbin_") for name in families)
        assert all(f.documentation for f in families.values())
        assert families["larbin_pages"].type == "counter"
        assert families["larbin_pages"].samples[0].value >= later["pages"]
        assert families["larbin_queued"].type == "gauge"
        ip_states = {s.labels["state"] for s in families["larbin_ips"].samples}
        assert {"ready", "cooling", "throttled", "dead"} <= ip_states
        assert "larbin_frontier_fifo" in families and "larbin_filtered" in families

        code, _ = crawl.call("POST", "/api/stop")
        assert code == 200
        assert crawl.wait(60) == 0
        assert not (crawl.jobdir / "http-address").exists()
    finally:
        crawl.kill()


def test_pause_holds_requests_stop_is_resumable(web: RunningWeb, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # Paused right after the seeds' robots.txt came back: the seed pages are then waiting out
    # their IP's 2.5 s delay inside the downloader, where the engine's own pause does not reach
    # (without PauseGate they reach the server ~2.5 s after the pause).
    crawl = LiveCrawl(web, out, settings={"DOWNLOAD_DELAY": 2.5})
    try:
        crawl.wait_until(lambda: crawl.status()["pages"] >= 1, 30, "the crawl did not start")
        code, answer = crawl.call("POST", "/api/pause")
        assert code == 200 and answer["paused"] is True
        assert crawl.status()["paused"] is True
        time.sleep(1.0)  # requests already sent when the pause came may still arrive
        quiet_from = time.time()
        time.sleep(3.0)
        during = [e for e in crawl.requests() if e["t"] >= quiet_from]
        assert during == [], f"{len(during)} requests reached the server while paused: {during}"
        _, metrics = crawl.call("GET", "/metrics")
        assert "larbin_paused 1.0" in metrics

        resumed_at = time.time()
        assert crawl.call("POST", "/api/resume")[0] == 200
        # a page, not only robots.txt or a sitemap: the first run must fetch part of the web
        crawl.wait_until(
            lambda: any(
                e["t"] >= resumed_at and e["path"] not in (ROBOTS, SITEMAP)
                for e in crawl.requests()
            ),
            10,
            "no page after resume",
        )
        assert crawl.status()["paused"] is False

        assert crawl.call("POST", "/api/stop")[0] == 200
        assert crawl.wait(60) == 0
    finally:
        crawl.kill()
    assert "Spider closed (shutdown)" in crawl.log()
    stats = json.loads((out / "stats.json").read_text())
    assert stats["finish_reason"] == "shutdown"
    first = Crawl(0, crawl.log(), [], stats, web.read_log())

    # The same command with the same JOBDIR continues: together the two runs fetch the ground
    # truth, nothing twice (test_resume's rules: a retried 5xx page counts once).
    again = run_crawl(
        web,
        tmp_path / "again",
        *seeds_args(web.seeds),
        settings={"JOBDIR": str(out / "job"), "LARBIN_STATUS_PORT": port_range()},
    )
    assert "Resuming" in again.stderr
    assert twice(check_resumed(web, first, again)) == {}


def test_two_crawls_serve_two_pages(web: RunningWeb, tmp_path: Path) -> None:
    ports = port_range(10)
    one = LiveCrawl(
        web, tmp_path / "one", settings={"DOWNLOAD_DELAY": 0.5, "LARBIN_STATUS_PORT": ports}
    )
    try:
        two = LiveCrawl(
            web, tmp_path / "two", settings={"DOWNLOAD_DELAY": 0.5, "LARBIN_STATUS_PORT": ports}
        )
        try:
            assert one.address != two.address
            assert one.status()["worker"] != two.status()["worker"]
            # Each page answers with its own token only.
            assert one.call("GET", "/api/status", token=two.token)[0] == 401
            for crawl in (one, two):
                assert crawl.call("POST", "/api/stop")[0] == 200
            assert two.wait(60) == 0
        finally:
            two.kill()
        assert one.wait(60) == 0
    finally:
        one.kill()


def test_no_free_port_is_one_error_and_the_crawl_goes_on(web: RunningWeb, tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        crawl = run_crawl(
            web,
            tmp_path / "run",
            *seeds_args(web.seeds[:1]),
            "-a",
            "depth=0",
            settings={"LARBIN_STATUS_PORT": f"{port},{port}"},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert f"ERROR: Status page: no free port in {port}-{port} on 127.0.0.1" in crawl.stderr
    assert "Traceback" not in crawl.stderr
    assert crawl.fetched(web.port) == {web.seeds[0]}
