"""PendingPages: a page is acknowledged only when it is done and all its children are queued."""

from __future__ import annotations

import pytest

from larbinscrapy.frontier.pending import PendingPages


@pytest.mark.parametrize(
    ("events", "acked_after"),
    [
        ([("done", 0)], 0),  # no children: at once
        ([("done", 2), ("child",), ("child",)], 2),  # the scraper queues children later
        ([("child",), ("done", 2), ("child",)], 2),  # or some before the page is done
        ([("child",), ("child",), ("done", 2)], 2),  # or all of them
        ([("done", 3), ("child",), ("child",)], None),  # a child still missing: no ack
        ([("child",), ("child",)], None),  # children without request_done: no ack
    ],
)
def test_ack_waits_for_the_page_and_every_child(events, acked_after):
    acked: list[object] = []
    pending = PendingPages(acked.append)
    for i, event in enumerate(events):
        if event[0] == "done":
            pending.page_done("p", event[1])
        else:
            pending.child_enqueued("p")
        if acked_after is not None and i < acked_after:
            assert acked == []
    assert acked == (["p"] if acked_after is not None else [])


def test_pages_are_counted_apart():
    acked: list[object] = []
    pending = PendingPages(acked.append)
    pending.page_done("a", 1)
    pending.page_done("b", 0)
    assert acked == ["b"]
    pending.child_enqueued("a")
    assert acked == ["b", "a"]
    assert len(pending) == 0
