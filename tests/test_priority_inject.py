"""A URL added with ``priority: true`` (``POST /api/urls``) is its site's next fetch, not fetched
behind the site's loaded queue (issue 26, finding 7). Judged at the test web's server: how many
of the site's other pages it served between the answer to the POST and the added URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.support.status import LiveCrawl, fetched_before_a_priority_url

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

DELAY = 1.0


@pytest.mark.crawl
def test_a_priority_url_is_fetched_at_its_sites_next_slot(web: RunningWeb, tmp_path: Path):
    crawl = LiveCrawl(web, tmp_path / "run", settings={"DOWNLOAD_DELAY": DELAY})
    try:
        before = fetched_before_a_priority_url(web, crawl)
        # the site's fetch in flight when the URL arrived may come first, nothing else
        assert len(before) <= 1, before
    finally:
        crawl.kill()
