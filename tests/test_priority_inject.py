"""A URL added with ``priority: true`` (``POST /api/urls``) is its site's next fetch, not fetched
behind the site's loaded queue (issue 26, finding 7). Judged at the test web's server: how many
of the site's other pages it served between the answer to the POST and the added URL.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from tests.support.status import LiveCrawl
from testweb.harness import SITE_FILES

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

DELAY = 1.0


@pytest.mark.crawl
def test_a_priority_url_is_fetched_at_its_sites_next_slot(web: RunningWeb, tmp_path: Path):
    crawl = LiveCrawl(web, tmp_path / "run", settings={"DOWNLOAD_DELAY": DELAY})
    try:
        truth = Counter(urlsplit(u).hostname for u in web.web.ground_truth(web.seeds, depth=5))
        crawl.wait_until(lambda: len(web.read_log()) >= 30, 60, "the crawl did not start")
        served = Counter(e["host"] for e in web.read_log() if e["path"] not in SITE_FILES)
        host = max(truth, key=lambda h: truth[h] - served[h])  # the site with most still queued
        assert truth[host] - served[host] >= 6, "no site with a loaded queue"
        added = f"http://{host}:{web.port}/added-with-priority"
        code, answer = crawl.call("POST", "/api/urls", {"urls": [added], "priority": True})
        assert code == 200 and answer["queued"] == 1, answer
        asked = time.time()
        crawl.wait_until(lambda: any(e["path"] == "/added-with-priority" for e in web.read_log()),
                         30, "the added URL was not fetched")
        log = [e for e in web.read_log()
               if e["t"] >= asked and e["host"] == host and e["path"] not in SITE_FILES]
        before = [e["path"] for e in log[: [e["path"] for e in log].index("/added-with-priority")]]
        # the site's fetch in flight when the URL arrived may come first, nothing else
        assert len(before) <= 1, before
    finally:
        crawl.kill()
