"""The stats file (``LARBIN_STATS_FILE``) outlives a failed write.

Seen at the descriptor limit (#35, point 4): the periodic write failed with EMFILE, Twisted
logged "Unhandled error in Deferred" and the file was never written again for the rest of the
crawl (a ``LoopingCall`` stops at its first error). A failed write is counted and logged in one
line; the next one writes the file again.
"""

from __future__ import annotations

import json
import logging
import shutil
from typing import TYPE_CHECKING

from scrapy import Spider
from scrapy.utils.test import get_crawler

from larbinscrapy.status.statsfile import StatsFile

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_a_failed_write_is_counted_in_one_line_and_the_next_writes_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    crawler = get_crawler(Spider, {"LARBIN_STATS_FILE": str(out / "stats.json")})
    stats_file = StatsFile.from_crawler(crawler)
    stats_file.write()
    shutil.rmtree(out)  # as EMFILE does: open() fails
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.status.statsfile"):
        stats_file.write()
        stats_file.write()
    assert crawler.stats.get_value("larbin/status/stats_file_failed") == 2
    lines = [r for r in caplog.records if r.name == "larbinscrapy.status.statsfile"]
    assert len(lines) == 1 and "stats.json" in lines[0].getMessage(), lines
    assert not any(r.exc_info for r in lines)  # one line, no traceback
    out.mkdir()
    crawler.stats.set_value("pages", 3)
    stats_file.write()
    written = json.loads((out / "stats.json").read_text())
    assert written["pages"] == 3 and written["larbin/status/stats_file_failed"] == 2
