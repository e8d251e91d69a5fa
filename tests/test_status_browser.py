"""The status page in a real browser: Debian's chromium, headless, driven by Playwright.

Against a running crawl of the test web: the page loads with the token from the logged URL,
its charts draw points within seconds, a URL added through the form is fetched, the pause
button pauses (nothing reaches the server). The screenshot is kept in the test's directory.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.support.status import LiveCrawl, port_range
from tests.support.wait import wait_stable

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
TWO_OR_MORE = re.compile(r"^([2-9]|[1-9][0-9]+)$")


def test_status_page_in_chromium(web: RunningWeb, tmp_path: Path) -> None:
    crawl = LiveCrawl(web, tmp_path / "run", settings={"DOWNLOAD_DELAY": 1.0})
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=CHROMIUM,
                args=ARGS,
                headless=True,
                viewport={"width": 1280, "height": 900},
            )
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(f"{crawl.address}/#token={crawl.token}")
                # (expect() reads the DOM from Playwright's own world: the page's CSP forbids
                # the eval that wait_for_function would need, and the test keeps that CSP.)
                expect(page.locator("#state")).to_have_text("running", timeout=15000)
                # Every chart has drawn points within a few seconds.
                for chart in ("#chart-pages", "#chart-items", "#chart-bytes"):
                    expect(page.locator(chart)).to_have_attribute(
                        "data-points", TWO_OR_MORE, timeout=15000
                    )
                assert int(page.text_content("#numbers b") or "0") > 0  # pages
                assert page.locator("#t-hosts td").count() >= 2

                # A URL through the form: queued, then fetched (the server's log says so).
                added = f"http://h06.test:{web.port}/added-by-browser"
                page.fill("#add-urls", added)
                page.check("#add-priority")
                page.click("#add-submit")
                expect(page.locator("#add-result")).to_have_text(
                    re.compile(r"^queued 1, already seen 0, refused 0"), timeout=15000
                )
                crawl.wait_until(
                    lambda: any(e["path"] == "/added-by-browser" for e in crawl.requests()),
                    20,
                    "the URL added through the form was not fetched",
                )

                page.screenshot(path=str(tmp_path / "status.png"), full_page=True)

                # The pause button pauses: the badge says so and nothing reaches the server.
                page.click("#pause")
                expect(page.locator("#state")).to_have_text("paused", timeout=10000)
                assert crawl.status()["paused"] is True
                time.sleep(1.0)  # requests already sent may still arrive
                quiet_from = time.time()
                time.sleep(3.0)
                assert [e for e in crawl.requests() if e["t"] >= quiet_from] == []
                assert errors == [], errors
            finally:
                browser.close()
        assert crawl.call("POST", "/api/stop")[0] == 200
        assert crawl.wait(60) == 0
    finally:
        crawl.kill()
    assert (tmp_path / "status.png").stat().st_size > 10_000


def test_what_a_person_sees_adds_up(web: RunningWeb, tmp_path: Path) -> None:
    """Issue 34, point 7: no "offline" badge for a page opened without its token, every figure
    named (the worker too), revisits due and done shown. The screenshot is kept."""
    crawl = LiveCrawl(
        web,
        tmp_path / "run",
        settings={
            "DOWNLOAD_DELAY": 0.2,
            "LARBIN_REVISIT": "true",
            "LARBIN_REVISIT_INTERVAL": 2,
            "LARBIN_REVISIT_INTERVAL_MIN": 2,
            "LARBIN_REVISIT_BUCKET": 0.25,
        },
    )
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=CHROMIUM,
                args=ARGS,
                headless=True,
                viewport={"width": 1280, "height": 1000},
            )
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.goto(f"{crawl.address}/")  # the address alone, as typed from memory
                expect(page.locator("#state")).to_have_text("no token", timeout=15000)
                expect(page.locator("#error")).to_contain_text("#token=", timeout=5000)
                page.screenshot(path=str(tmp_path / "status-no-token.png"))

                page.goto(f"{crawl.address}/#token={crawl.token}")
                page.reload()
                expect(page.locator("#state")).to_have_text("running", timeout=15000)
                expect(page.locator("#worker")).to_have_text(re.compile(r"^worker \S+:\d+$"))
                # revisits: a table with what is due and what was done, done growing
                expect(page.locator("#t-revisits")).to_contain_text("due", timeout=15000)
                done = page.locator("#t-revisits tr", has_text="done").locator("td").nth(1)
                expect(done).to_have_text(TWO_OR_MORE, timeout=60000)
                labels = page.locator("table td:first-child").all_text_contents()
                assert not [label for label in labels if "_" in label], labels
                page.screenshot(path=str(tmp_path / "status.png"), full_page=True)
                assert errors == [], errors
            finally:
                browser.close()
        assert crawl.call("POST", "/api/stop")[0] == 200
        assert crawl.wait(60) == 0
    finally:
        crawl.kill()


def test_all_workers_buttons_in_chromium(web: RunningWeb, tmp_path: Path, redis_url: str) -> None:
    """Issue 33, point 4: a distributed crawl's page says which buttons act on this worker and
    which on all; "Pause all" on worker 1's page pauses worker 2 too (the web hears nothing),
    "Resume all" resumes both, "Stop all" ends both cleanly."""
    settings = {
        "REDIS_URL": redis_url,
        "DOWNLOAD_DELAY": 0.5,
        "LARBIN_REDIS_KEEP_ALIVE": True,
        "LARBIN_STATUS_PORT": port_range(10),
    }
    env = {"SCRAPY_SETTINGS_MODULE": "settings.distributed"}
    workers = [LiveCrawl(web, tmp_path / n, settings=settings, env=env) for n in ("w1", "w2")]
    one, two = workers
    try:
        for worker in workers:
            worker.wait_until(lambda w=worker: w.status()["pages"] >= 3, 60, "no fetch")
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(
                str(tmp_path / "profile"),
                executable_path=CHROMIUM,
                args=ARGS,
                headless=True,
                viewport={"width": 1280, "height": 900},
            )
            try:
                page = browser.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("dialog", lambda dialog: dialog.accept())  # "Stop every worker?"
                page.goto(f"{one.address}/#token={one.token}")
                expect(page.locator("#state")).to_have_text("running", timeout=15000)
                expect(page.locator("#controls-all")).to_be_visible()
                expect(page.locator("#scope-one")).to_have_text("this worker")
                expect(page.locator("#all-state")).to_contain_text("this worker only")

                page.click("#pause-all")
                expect(page.locator("#state")).to_have_text("paused", timeout=10000)
                two.wait_until(lambda: two.status()["paused"] is True, 20, "w2 not paused")
                expect(page.locator("#all-state")).to_contain_text("paused", timeout=10000)
                wait_stable(lambda: len(web.read_log()), 3.0, 30, "requests while paused")
                page.screenshot(path=str(tmp_path / "status-all.png"), full_page=True)

                before = two.status()["pages"]
                page.click("#resume-all")
                expect(page.locator("#state")).to_have_text("running", timeout=10000)
                two.wait_until(lambda: two.status()["pages"] > before, 30, "w2 not resumed")

                page.click("#stop-all")
                assert [w.wait(60) for w in workers] == [0, 0]
                assert errors == [], errors
            finally:
                browser.close()
    finally:
        for worker in workers:
            worker.kill()
    assert (tmp_path / "status-all.png").stat().st_size > 10_000
