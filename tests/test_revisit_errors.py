"""Pages answering 5xx are not revisited forever at the normal rhythm (issue 34, point 5): each
5xx in a row multiplies the page's wait, and after ``LARBIN_REVISIT_ERRORS_MAX`` of them the page
leaves the schedule, counted. Fake clock; the schedule is the real one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import Request
from scrapy.http import HtmlResponse

from larbinscrapy import meta as M
from tests.support.cores import ManualClock
from tests.support.revisit import fetch, local_revisits, taken

if TYPE_CHECKING:
    from larbinscrapy.revisit.entry import Entry
    from larbinscrapy.revisit.extension import RevisitExtension

URL = "http://a.test/flaky"


def _fetch(
    ext: RevisitExtension, status: int, entry: Entry | None = None, body: bytes = b"<p>x</p>"
) -> None:
    fetch(ext, URL, status, entry.pack().hex() if entry else None, body)


def _next(ext: RevisitExtension, clock: ManualClock, limit: float = 1e6) -> tuple[float, Entry]:
    """(seconds waited, entry) until the page comes out of the schedule again."""
    start = clock.now
    while clock.now - start < limit:
        clock.now += 1.0
        out = taken(ext, clock.now)
        if out:
            return clock.now - start, out[0]
    raise AssertionError(f"not due within {limit} s")


def test_a_page_answering_5xx_backs_off_then_leaves_the_schedule_counted():
    clock = ManualClock(1_000_000.0)
    ext = local_revisits(
        clock,
        LARBIN_REVISIT_INTERVAL_MIN=10.0,
        LARBIN_REVISIT_INTERVAL=10.0,
        LARBIN_REVISIT_INTERVAL_MAX=100_000.0,
        LARBIN_REVISIT_BUCKET=1.0,
        LARBIN_REVISIT_ERRORS_MAX=4,
    )
    _fetch(ext, 200)
    waited, entry = _next(ext, clock)
    assert waited <= 13
    waits = []
    for _ in range(3):  # three 5xx in a row: each wait longer than the one before
        _fetch(ext, 500, entry)
        waited, entry = _next(ext, clock)
        waits.append(waited)
    assert waits[0] > 13 and waits[1] > 1.5 * waits[0] and waits[2] > 1.5 * waits[1], waits
    _fetch(ext, 503, entry)  # the fourth: no more revisits
    assert len(ext.schedule) == 0
    assert ext.stats.get_value("larbin/revisit/server_error") == 4
    assert ext.stats.get_value("larbin/revisit/server_error_dropped") == 1
    ext.schedule.close()


def test_a_page_back_after_5xx_starts_the_rule_over_and_its_content_is_compared():
    clock = ManualClock(1_000_000.0)
    ext = local_revisits(
        clock,
        LARBIN_REVISIT_INTERVAL_MIN=10.0,
        LARBIN_REVISIT_INTERVAL=10.0,
        LARBIN_REVISIT_INTERVAL_MAX=100_000.0,
        LARBIN_REVISIT_BUCKET=1.0,
        LARBIN_REVISIT_ERRORS_MAX=4,
    )
    _fetch(ext, 200)
    _, entry = _next(ext, clock)
    for _ in range(2):
        _fetch(ext, 502, entry)
        _, entry = _next(ext, clock)
    request = Request(URL, meta={M.REVISIT: entry.pack().hex()})
    ext.fetched(request, HtmlResponse(URL, status=200, body=b"<p>x</p>", request=request))
    assert request.meta[M.CHANGED] is False  # the same content as before the errors
    waited, entry = _next(ext, clock)
    assert waited <= 13  # the rule's own interval again
    ext.schedule.close()
