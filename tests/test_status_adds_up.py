"""The status page and the log line add up (issue 34, point 7): the periodic log line's parts
sum to its total and each figure has its name; one name for the overflow FIFOs; revisits due
and done in the status document."""

from __future__ import annotations

import re

from larbinscrapy.frontier.fifos import FIFO_LABELS, FIFO_NAMES
from larbinscrapy.status.logline import format_line
from larbinscrapy.status.snapshot import build_status

FRONTIER = {
    "queued": 456,
    "fifos": {"priority": 0, "priority-overflow": 0, "normal": 0, "normal-overflow": 336},
    "in_memory": 120,
    "sites": {"in_memory": 3, "resolving": 0, "dead": 0},
    "ips": {"ready": 1, "fetching": 2, "cooling": 3, "throttled": 4, "dead": 5},
}


def test_the_log_lines_parts_add_up_and_each_figure_is_named():
    line, _ = format_line({}, FRONTIER, (0, 0, 0), interval=60.0)
    queued = re.search(r"queued (\d+) \(([^)]*)\)", line)
    assert queued, line
    parts = {name: int(n) for name, n in re.findall(r"([a-z][a-z -]*?) (\d+)", queued.group(2))}
    assert sum(parts.values()) == int(queued.group(1)) == 456, line
    assert parts["in memory"] == 120
    ips = re.search(r"IPs ([^;]*)", line)
    assert ips and sum(int(n) for n in re.findall(r"\d+", ips.group(1))) == 15, line
    # every figure follows (or precedes) a word: no bare "0+336"
    assert not re.search(r"\d\+\d", line), line


def test_one_name_for_the_overflow_fifos():
    assert FIFO_LABELS == FIFO_NAMES
    assert all("wait" not in name for name in FIFO_LABELS)


def test_revisits_due_and_done_in_the_status_document():
    stats = {
        "larbin/revisit/pending": 40,
        "larbin/revisit/due": 12,
        "larbin/revisit/changed": 3,
        "larbin/revisit/unchanged": 5,
        "larbin/revisit/not_modified": 4,
        "larbin/revisit/server_error": 1,
        "larbin/revisit/failed": 1,
    }
    doc = build_status(
        stats=stats,
        frontier=FRONTIER,
        rates={},
        paused=False,
        stopping=False,
        uptime=1.0,
        busiest=[],
        dns_cached=None,
        worker="w",
    )
    assert doc["revisits"] == {
        "scheduled": 40,
        "due": 12,
        "done": 10,
        "changed": 3,
        "unchanged": 5,
        "not modified": 4,
        "server errors": 1,
        "failed": 1,
    }
    quiet = build_status(
        stats={},
        frontier=FRONTIER,
        rates={},
        paused=False,
        stopping=False,
        uptime=1.0,
        busiest=[],
        dns_cached=None,
        worker="w",
    )
    assert quiet["revisits"] == {}  # a one-pass crawl: nothing to show
