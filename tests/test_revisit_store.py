"""The revisit core without a crawl: the rule's table, the packed entry, the store on disk.

The store is reopened after a clean close and after "crashes" (the object dropped without
``close()``, the journal torn, a checkpoint interrupted between its steps) and compared with a
model of what must be scheduled.
"""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

import pytest

from larbinscrapy.parse.urls import fingerprint_url
from larbinscrapy.revisit.entry import MAX_ETAG, Entry, frame, frames
from larbinscrapy.revisit.observe import conditional_headers, observe
from larbinscrapy.revisit.rule import RevisitRule, freshness
from larbinscrapy.revisit.store import RevisitStore
from tests.support.cores import ManualClock

if TYPE_CHECKING:
    from pathlib import Path

DAY = 86400.0
RULE = RevisitRule(initial=DAY, minimum=3600.0, maximum=30 * DAY)


# -- the rule ---------------------------------------------------------------------------------
def run_rule(rule: RevisitRule, changes: str) -> list[float]:
    """Intervals after each fetch of a page whose changes are "c" (changed) / "u" (unchanged)."""
    interval, streak, out = rule.first(), 0, []
    for c in changes:
        interval, streak = rule.update(interval, streak, c == "c")
        out.append(interval)
    return out


def test_five_unchanged_in_a_row_double_five_changed_halve():
    assert run_rule(RULE, "uuuu") == [DAY] * 4
    assert run_rule(RULE, "uuuuu") == [DAY] * 4 + [2 * DAY]
    assert run_rule(RULE, "uuuuu" * 2)[-1] == 4 * DAY
    assert run_rule(RULE, "ccccc")[-1] == DAY / 2
    assert run_rule(RULE, "cccccccccc")[-1] == DAY / 4


def test_a_broken_run_starts_again():
    assert run_rule(RULE, "uuuucuuuu")[-1] == DAY  # 4 + 4 unchanged, never 5 in a row
    assert run_rule(RULE, "uuuucuuuuu")[-1] == 2 * DAY
    assert run_rule(RULE, "ccccuccccu")[-1] == DAY


def test_bounds_and_hints():
    assert run_rule(RULE, "u" * 100)[-1] == 30 * DAY
    assert run_rule(RULE, "c" * 100)[-1] == 3600.0
    assert RULE.first(60.0) == 3600.0 and RULE.first(1e9) == 30 * DAY and RULE.first(7200) == 7200
    assert RULE.wait(DAY, None) == DAY
    assert RULE.wait(DAY, 10.0) == DAY  # fresh for 10 s: the interval decides
    assert RULE.wait(DAY, 3 * DAY) == 3 * DAY  # fresh for 3 days: not asked again before
    with pytest.raises(ValueError, match="LARBIN_REVISIT_INTERVAL_MIN"):
        RevisitRule(initial=1, minimum=10, maximum=5)


@pytest.mark.parametrize(
    ("cc", "expires", "date", "expected"),
    [
        (b"public, max-age=600", None, None, 600.0),
        (b"max-age=600", b"Thu, 01 Dec 1994 16:00:00 GMT", None, 600.0),  # max-age wins
        (None, b"Thu, 01 Jan 2026 01:00:00 GMT", b"Thu, 01 Jan 2026 00:00:00 GMT", 3600.0),
        (None, b"not a date", None, 0.0),
        (b"no-store", None, None, None),
        (b"max-age=oops", None, None, None),
        (None, None, None, None),
    ],
)
def test_freshness(cc, expires, date, expected):
    assert freshness(cc, expires, date, now=0.0) == expected


# -- the entry --------------------------------------------------------------------------------
def entry(url: str, due: float, **kw) -> Entry:
    return Entry(fingerprint_url(url), url, due, kw.pop("interval", 10.0), **kw)


def test_entry_round_trip_and_size():
    e = entry(
        "http://a.test/x?y=1",
        123.5,
        streak=-3,
        fetch_count=7,
        digest=b"12345678",
        last_modified=1_700_000_000,
        etag=b'"abc"',
        depth=3,
        site_depth=2,
    )
    assert Entry.unpack(e.pack()) == e
    assert e.state_size() == 51 + 5
    big = e.evolve(etag=b"x" * MAX_ETAG)
    assert big.state_size() <= 100  # the budget: fingerprint, validators, interval, streak...
    too_long = Entry.unpack(e.evolve(etag=b"x" * (MAX_ETAG + 1)).pack())
    assert too_long.etag == b""  # not kept: If-Modified-Since still works


def test_frames_stop_at_a_torn_or_corrupt_record():
    data = frame(b"one") + frame(b"two")
    assert [bytes(p) for _, p in frames(data)] == [b"one", b"two"]
    assert [bytes(p) for _, p in frames(data[:-1])] == [b"one"]
    bad = bytearray(data)
    bad[-6] ^= 1
    assert [bytes(p) for _, p in frames(bytes(bad))] == [b"one"]


def test_observe_first_fetch_304_and_change():
    headers = {b"ETag": b'"v1"', b"Last-Modified": b"Mon, 30 Nov 2026 08:00:00 GMT"}
    rule = RevisitRule(initial=10, minimum=1, maximum=100, streak=1)
    first, changed = observe(
        None,
        fp=b"f" * 16,
        url="http://a.test/",
        status=200,
        body=b"<p>a</p>",
        headers=headers,
        now=1000.0,
        rule=rule,
        near_distance=0,
    )
    assert changed and first.fetch_count == 1 and first.due == 1010.0 and first.etag == b'"v1"'
    assert conditional_headers(first) == {
        "If-None-Match": b'"v1"',
        "If-Modified-Since": b"Mon, 30 Nov 2026 08:00:00 GMT",
    }
    again, changed = observe(
        first,
        fp=first.fp,
        url=first.url,
        status=304,
        body=b"",
        headers={},
        now=1010.0,
        rule=rule,
        near_distance=0,
    )
    assert not changed and again.interval == 20 and again.etag == b'"v1"' and again.fetch_count == 2
    same, changed = observe(
        again,
        fp=first.fp,
        url=first.url,
        status=200,
        body=b"<p> a </p>\n",
        headers={},
        now=1030.0,
        rule=rule,
        near_distance=0,
    )
    assert not changed  # the duplicate pipeline's hash ignores whitespace
    other, changed = observe(
        same,
        fp=first.fp,
        url=first.url,
        status=200,
        body=b"<p>b</p>",
        headers={},
        now=1070.0,
        rule=rule,
        near_distance=0,
    )
    assert changed and other.interval == 20


# -- the store --------------------------------------------------------------------------------
def open_store(path: Path, clock: ManualClock, bucket: float = 10.0) -> RevisitStore:
    store = RevisitStore(str(path), bucket, clock)
    store.open()
    return store


def test_due_pages_come_out_by_bucket_and_never_early(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    for i in range(50):
        store.add(entry(f"http://a.test/{i}", 1000.0 + i))  # due over 50 s: 5 buckets
    assert store.take_due(1009.9, 100) == []  # the first bucket ends at 1010
    got = store.take_due(1010.0, 100)
    assert sorted(e.url for e in got) == sorted(f"http://a.test/{i}" for i in range(10))
    assert all(e.due <= 1010.0 for e in got)
    assert len(store.take_due(1050.0, 15)) == 15  # bounded by the room in flight
    assert len(store) == 50 and len(store.flight) == 25
    store.close()


def test_reopen_after_close_keeps_every_page_and_flight(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    for i in range(30):
        store.add(entry(f"http://a.test/{i}", 1000.0 + i))
    taken = store.take_due(1020.0, 100)
    store.done(taken[0].evolve(due=2000.0, fetch_count=2))
    store.close()
    again = open_store(tmp_path, clock)
    assert len(again) == 30
    assert {e.url for e in again.inflight()} == {e.url for e in taken[1:]}
    assert len(again.take_due(1030.0, 100)) == 10
    assert [e.url for e in again.take_due(2010.0, 100)] == [taken[0].url]
    again.close()


def model_crash_run(tmp_path: Path, seed: int) -> None:
    """Random adds, takes, dones and checkpoints; a crash (no close) anywhere; then compare."""
    rng = random.Random(seed)
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock, bucket=5.0)
    scheduled: dict[str, int] = {}  # url -> fetch count it is scheduled for
    flight: dict[str, Entry] = {}
    for step in range(rng.randrange(50, 400)):
        clock.now += rng.random()
        op = rng.random()
        if op < 0.4:
            url = f"http://a.test/{step}"
            store.add(entry(url, clock.now + rng.uniform(1, 30)))
            scheduled[url] = 1
        elif op < 0.6:
            for e in store.take_due(clock.now, rng.randrange(1, 20)):
                flight[e.url] = e
        elif op < 0.85 and flight:
            e = flight.pop(rng.choice(sorted(flight)))
            store.done(e.evolve(due=clock.now + rng.uniform(1, 30), fetch_count=e.fetch_count + 1))
            scheduled[e.url] = e.fetch_count + 1
        elif op < 0.9:
            store.checkpoint()
    # crash: the object is dropped; the journal fd is closed as the kernel would
    os.close(store._journal)
    recovered = open_store(tmp_path, clock, bucket=5.0)
    found = {e.url: e.fetch_count for e in recovered.inflight()}
    assert {e.url for e in recovered.inflight()} == set(flight)
    for e in recovered.take_due(1e12, 10**6):
        assert e.url not in found, "a page scheduled twice"
        found[e.url] = e.fetch_count
    assert found == scheduled
    recovered.close()


@pytest.mark.parametrize("seed", range(12))
def test_a_crash_at_any_point_loses_no_schedule_entry(tmp_path, seed):
    model_crash_run(tmp_path, seed)


def test_a_torn_journal_tail_is_cut_and_the_rest_kept(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    for i in range(5):
        store.add(entry(f"http://a.test/{i}", 1001.0))
    journal = tmp_path / f"journal.{store.epoch}"
    os.close(store._journal)
    with open(journal, "ab") as f:
        f.write(frame(b"A" + entry("http://a.test/torn", 1001.0).pack())[:-3])
    again = open_store(tmp_path, clock)
    assert sorted(e.url for e in again.take_due(1010.0, 100)) == [
        f"http://a.test/{i}" for i in range(5)
    ]
    again.close()


def test_an_interrupted_checkpoint_is_harmless(tmp_path):
    """Killed after the new journal was created, before the checkpoint replaced: old state wins."""
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    for i in range(5):
        store.add(entry(f"http://a.test/{i}", 1001.0))
    os.close(store._journal)
    (tmp_path / f"journal.{store.epoch + 1}").write_bytes(b"")  # created, checkpoint not yet
    (tmp_path / f"{200:016d}.due").write_bytes(b"left over")  # a bucket not in the checkpoint
    again = open_store(tmp_path, clock)
    assert len(again.take_due(1010.0, 100)) == 5
    assert not (tmp_path / f"{200:016d}.due").exists()
    again.close()


def test_duplicates_in_the_schedule_are_dropped_at_take_time(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    store.add(entry("http://a.test/", 1001.0))
    store.add(entry("http://a.test/", 1002.0))  # the frontier re-fetched a page after a crash
    assert len(store.take_due(1010.0, 10)) == 1 and store.duplicates == 1
    store.close()


def test_without_a_directory_the_store_is_temporary(tmp_path):
    store = RevisitStore(None, 1.0)
    store.open()
    store.add(entry("http://a.test/", 1.0))
    path = store.dir
    store.close()
    assert not path.exists()


def test_killed_between_bucket_flush_and_checkpoint_replace(tmp_path, monkeypatch):
    """Buckets already longer than the checkpoint says: cut back, then rebuilt from the journal."""
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    for i in range(20):
        store.add(entry(f"http://a.test/{i}", 1001.0 + i))
    taken = store.take_due(1010.0, 3)

    def killed(*args):
        raise SystemExit("kill -9")

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(SystemExit):
        store.checkpoint()
    monkeypatch.undo()
    os.close(store._journal)
    again = open_store(tmp_path, clock)
    assert {e.url for e in again.inflight()} == {e.url for e in taken}
    rest = again.take_due(1e12, 100)
    assert len(rest) == 17 and not {e.url for e in rest} & {e.url for e in taken}
    again.close()


def test_with_near_duplicates_on_a_small_edit_is_no_change():
    from larbinscrapy.revisit.entry import SIMHASH

    rule = RevisitRule(initial=10, minimum=1, maximum=100, streak=1)
    words = " ".join(f"w{i} common{i % 7} text{i % 13}" for i in range(200))
    body = f"<html><body><p>{words}</p></body></html>".encode()
    first, _ = observe(
        None,
        fp=b"f" * 16,
        url="http://a.test/",
        status=200,
        body=body,
        headers={},
        now=0.0,
        rule=rule,
        near_distance=3,
    )
    assert first.flags & SIMHASH
    edited = body.replace(b"w5 ", b"w5 edited ")  # one word more: a few shingles differ
    same, changed = observe(
        first,
        fp=first.fp,
        url=first.url,
        status=200,
        body=edited,
        headers={},
        now=10.0,
        rule=rule,
        near_distance=3,
    )
    assert not changed and same.interval == 20
    plain, _ = observe(
        None,
        fp=b"f" * 16,
        url="http://a.test/",
        status=200,
        body=body,
        headers={},
        now=0.0,
        rule=rule,
        near_distance=0,
    )
    _, changed = observe(
        plain,
        fp=plain.fp,
        url=plain.url,
        status=200,
        body=edited,
        headers={},
        now=10.0,
        rule=rule,
        near_distance=0,
    )
    assert changed  # without simhash any change of the hash counts
    other = f"<html><body><p>{words[::-1]}</p></body></html>".encode()
    _, changed = observe(
        first,
        fp=first.fp,
        url=first.url,
        status=200,
        body=other,
        headers={},
        now=10.0,
        rule=rule,
        near_distance=3,
    )
    assert changed


def test_a_fresh_response_is_not_asked_again_while_fresh():
    rule = RevisitRule(initial=10, minimum=1, maximum=1000)
    fresh = {b"Cache-Control": b"max-age=300"}
    first, _ = observe(
        None,
        fp=b"f" * 16,
        url="http://a.test/",
        status=200,
        body=b"x",
        headers=fresh,
        now=0.0,
        rule=rule,
        near_distance=0,
    )
    assert first.interval == 300 and first.due == 300  # the hint starts the interval
    again, _ = observe(
        first.evolve(interval=10.0),
        fp=first.fp,
        url=first.url,
        status=304,
        body=b"",
        headers=fresh,
        now=300.0,
        rule=rule,
        near_distance=0,
    )
    assert again.interval == 10 and again.due == 600  # the rule's interval, the wait is longer


def test_a_corrupt_checkpoint_is_refused_with_a_message(tmp_path):
    clock = ManualClock(1000.0)
    store = open_store(tmp_path, clock)
    store.add(entry("http://a.test/", 1001.0))
    store.close()
    data = bytearray((tmp_path / "checkpoint").read_bytes())
    data[3] ^= 0xFF
    (tmp_path / "checkpoint").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="CRC"):
        open_store(tmp_path, clock)
