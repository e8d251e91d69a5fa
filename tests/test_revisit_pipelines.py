"""Storage pipelines over a real revisiting crawl: unchanged revisits are not stored again, the
content-duplicate pipeline does not drop a page as a copy of itself, WARC gets revisit records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.support.crawl import run_crawl, seeds_args
from tests.support.revisit import RULE, by_page
from testweb.changing import start_changing

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"


def test_revisits_through_simple_save_mirror_and_warc(tmp_path: Path):
    with start_changing(tmp_path / "web", period=3.0) as web:
        out = tmp_path / "out"
        crawl = run_crawl(
            web,
            out,
            *seeds_args(web.seeds[:1]),
            timeout=60,
            settings={
                **RULE,
                "CLOSESPIDER_TIMEOUT": 5,
                "LARBIN_SIMPLE_SAVE": True,
                "LARBIN_SIMPLE_SAVE_DIR": str(out / "save"),
                "LARBIN_MIRROR_SAVE": True,
                "LARBIN_MIRROR_DIR": str(out / "mirror"),
                "LARBIN_WARC": True,
                "LARBIN_WARC_DIR": str(out / "warc"),
            },
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    pages = by_page(crawl.requests)
    assert len(pages) == 11 and all(len(r) >= 3 for r in pages.values())
    items = crawl.items
    changed = [i for i in items if i["changed"] is not False]
    unchanged = [i for i in items if i["changed"] is False]
    assert unchanged and changed
    # no page was dropped as a duplicate of its own earlier fetch
    assert Counter(i["url"] for i in items) == Counter(
        web.url(r["host"], r["path"]) for rs in pages.values() for r in rs
    )
    stats = crawl.stats
    assert "larbin/contentdup/dropped" not in stats
    # simple save: one file per first fetch or changed revisit; unchanged ones skipped
    index = [json.loads(line) for line in (out / "save" / "index.jsonl").read_text().splitlines()]
    assert len(index) == len(changed)
    assert stats["larbin/simplesave/unchanged"] == len(unchanged)
    assert stats["larbin/mirrorsave/unchanged"] == len(unchanged)
    # WARC: response records for changed pages, revisit records for the others
    records = []
    for path in sorted((out / "warc").glob("*.warc.gz")):
        with open(path, "rb") as f:
            for record in ArchiveIterator(f):
                records.append(
                    (
                        record.rec_type,
                        record.rec_headers.get_header("WARC-Profile"),
                        record.http_headers.get_statuscode() if record.http_headers else None,
                    )
                )
    kinds = Counter((t, p, s) for t, p, s in records if t in ("response", "revisit"))
    n304 = sum(1 for i in unchanged if i["status"] == 304)
    assert kinds[("revisit", NOT_MODIFIED, "304")] == n304 > 0
    assert kinds[("revisit", IDENTICAL, "200")] == len(unchanged) - n304 > 0  # the plain page
    assert sum(n for (t, _, _), n in kinds.items() if t == "response") == len(changed)
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "warcio.cli",
            "check",
            "-v",
            *map(str, (out / "warc").glob("*.warc.gz")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
