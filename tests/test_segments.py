"""SegmentFifo behaviour: FIFO order, leases and acks, reopen, kill -9, torn and corrupt files."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from larbinscrapy.frontier.segments import SegmentFifo

REPO = Path(__file__).resolve().parent.parent
SEG = 10  # records per segment in these tests, so boundaries are crossed often


def rec(i: int) -> bytes:
    return b"rec-%d" % i


def drain(fifo: SegmentFifo) -> list[tuple[int, bytes]]:
    out = []
    while (item := fifo.pop()) is not None:
        out.append(item)
    return out


def seg_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.seg"))


@pytest.fixture
def qdir(tmp_path: Path) -> Path:
    return tmp_path / "fifo"


# -- in-process behaviour -------------------------------------------------------------------


def test_fifo_order_across_segments(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        rids = [fifo.push(rec(i)) for i in range(35)]
        assert rids == list(range(35))
        assert seg_files(qdir) == [f"{n:08d}.seg" for n in range(4)]
        assert drain(fifo) == [(i, rec(i)) for i in range(35)]
        for rid in rids:
            fifo.ack(rid)


def test_interleaved_push_pop_reads_what_is_still_buffered(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        got = []
        for i in range(55):
            fifo.push(rec(i))
            if i % 3 == 0:
                got.append(fifo.pop())
        got += drain(fifo)
        assert [r for _, r in got] == [rec(i) for i in range(55)]
        for rid, _ in got:
            fifo.ack(rid)


def test_empty_large_and_binary_records(qdir: Path) -> None:
    records = [b"", bytes(range(256)) * 4, b"x" * 700_000, b"\x00" * 9, b"tail"]
    with SegmentFifo(qdir, SEG) as fifo:
        for r in records:
            fifo.push(r)
        assert [r for _, r in drain(fifo)] == records
    with SegmentFifo(qdir, SEG) as fifo:  # and again from disk
        assert [r for _, r in drain(fifo)] == records
        for rid in range(len(records)):
            fifo.ack(rid)


def test_len_and_unacked_accounting(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        assert (len(fifo), fifo.unacked) == (0, 0)
        for i in range(23):
            fifo.push(rec(i))
        assert (len(fifo), fifo.unacked) == (23, 0)
        popped = [fifo.pop() for _ in range(12)]
        assert (len(fifo), fifo.unacked) == (11, 12)
        fifo.ack(popped[0][0])
        fifo.ack(popped[0][0])  # idempotent
        fifo.ack(999)  # unknown
        fifo.ack(-1)
        fifo.ack(20)  # pushed but not popped: not a lease, ignored
        assert (len(fifo), fifo.unacked) == (11, 11)
        for rid, _ in popped[1:]:
            fifo.ack(rid)
        assert (len(fifo), fifo.unacked) == (11, 0)
        assert fifo.pop() == (12, rec(12))
        assert (len(fifo), fifo.unacked) == (10, 1)


def test_reopen_returns_leased_first_then_unpopped_never_acked(qdir: Path) -> None:
    fifo = SegmentFifo(qdir, SEG)
    for i in range(27):
        fifo.push(rec(i))
    popped = [fifo.pop() for _ in range(15)]
    acked = {3, 4, 10, 11, 12, 13}
    for rid in acked:
        fifo.ack(rid)
    fifo.close()
    assert qdir.exists()

    fifo = SegmentFifo(qdir, SEG)
    assert (len(fifo), fifo.unacked) == (27 - len(acked), 0)
    got = drain(fifo)
    leased_back = [(rid, r) for rid, r in popped if rid not in acked]
    assert got[: len(leased_back)] == leased_back
    assert got == [(i, rec(i)) for i in range(27) if i not in acked]
    for rid, _ in got[:5]:
        fifo.ack(rid)
    new = fifo.push(b"after reopen")
    assert new >= 30  # a reopened FIFO never appends to an old segment
    fifo.close()

    fifo = SegmentFifo(qdir, SEG)
    again = drain(fifo)
    assert again == [*got[5:], (new, b"after reopen")]
    for rid, _ in again:
        fifo.ack(rid)
    fifo.close()
    assert not qdir.exists()


def test_fully_acked_segments_deleted_at_checkpoint(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        for i in range(35):
            fifo.push(rec(i))
        popped = [fifo.pop() for _ in range(25)]
        for rid, _ in popped:
            if rid != 12:
                fifo.ack(rid)
        fifo.checkpoint()
        # 0 all acked -> gone; 1 waits for rid 12; 2 not all popped; 3 is still written to
        assert seg_files(qdir) == ["00000001.seg", "00000002.seg", "00000003.seg"]
        fifo.ack(12)
        fifo.checkpoint()
        assert seg_files(qdir) == ["00000002.seg", "00000003.seg"]
        state = json.loads((qdir / "state.json").read_text())
        assert [s["no"] for s in state["segments"]] == [2, 3]
        assert (qdir / "acks.log").stat().st_size == 0  # compacted into the state
        for rid, _ in drain(fifo):
            fifo.ack(rid)
    assert not qdir.exists()


def test_close_removes_files_only_when_empty(tmp_path: Path) -> None:
    with SegmentFifo(tmp_path, SEG) as fifo:  # existing directory: emptied, kept
        fifo.ack(fifo.push(b"a"))  # not popped: ack ignored, record stays
    assert seg_files(tmp_path) == ["00000000.seg"]
    with SegmentFifo(tmp_path, SEG) as fifo:
        rid, _ = fifo.pop()
        fifo.ack(rid)
    assert list(tmp_path.iterdir()) == []


def test_second_open_of_the_same_directory_is_refused(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG), pytest.raises(RuntimeError, match="another SegmentFifo"):
        SegmentFifo(qdir, SEG)


def test_reopen_keeps_the_segment_size_it_was_written_with(
    qdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        for i in range(25):
            fifo.push(rec(i))
    with caplog.at_level(logging.WARNING), SegmentFifo(qdir, 1000) as fifo:
        assert "segment_records=10" in caplog.text
        got = drain(fifo)
        assert got == [(i, rec(i)) for i in range(25)]
        for rid, _ in got:
            fifo.ack(rid)


def test_push_rejects_a_record_too_large_to_frame(qdir: Path) -> None:
    with SegmentFifo(qdir, SEG) as fifo, pytest.raises(ValueError, match="larger than"):
        fifo.push(bytes((1 << 26) + 1))


# -- kill -9 ------------------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    from larbinscrapy.frontier.segments import SegmentFifo

    plan = json.loads(sys.argv[1])
    fifo = SegmentFifo(plan["dir"], plan["seg"])
    leases, acked, pushed = [], [], []
    report = {}
    for op, *args in plan["steps"]:
        if op == "push":
            for i in range(*args):
                fifo.push(b"rec-%d" % i)
                pushed.append(i)
        elif op == "pop":
            for _ in range(args[0]):
                leases.append(fifo.pop())
        elif op == "ack":
            for rid, payload in leases[: args[0]]:
                fifo.ack(rid)
                acked.append(payload.decode())
            del leases[: args[0]]
        elif op in ("flush", "checkpoint"):
            getattr(fifo, op)()
            report = {"flushed": list(pushed), "acked": list(acked)}
    print(json.dumps(report), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def run_child(directory: Path, steps: list[list[object]]) -> dict[str, list]:
    plan = json.dumps({"dir": str(directory), "seg": SEG, "steps": steps})
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, plan], capture_output=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    return json.loads(proc.stdout)


def check_recovered(directory: Path, pushed: set[int], acked: set[str], unflushed: set[int]):
    fifo = SegmentFifo(directory, SEG)
    got = drain(fifo)
    payloads = [r.decode() for _, r in got]
    assert len(payloads) == len(set(payloads)), "a record came back twice"
    assert not acked & set(payloads), "an acked record came back"
    missing = {f"rec-{i}" for i in pushed} - acked - set(payloads)
    assert not missing, f"flushed records lost: {sorted(missing)}"
    extra = set(payloads) - {f"rec-{i}" for i in pushed | unflushed}
    assert not extra
    assert [rid for rid, _ in got] == sorted(rid for rid, _ in got)
    assert (len(fifo), fifo.unacked, fifo.corrupt_records) == (0, len(got), 0)
    return fifo, got


KILLS = {
    "mid_segment": [["push", 0, 25], ["pop", 8], ["ack", 5], ["flush"]],
    "right_after_rollover": [["push", 0, 31], ["pop", 10], ["ack", 10], ["flush"]],
    "after_checkpoint": [
        ["push", 0, 40],
        ["pop", 25],
        ["ack", 20],
        ["checkpoint"],
        ["push", 40, 45],
        ["pop", 3],
        ["ack", 2],
        ["flush"],
    ],
    "unflushed_tail": [["push", 0, 20], ["pop", 4], ["ack", 2], ["flush"], ["push", 20, 24]],
}


@pytest.mark.parametrize("steps", KILLS.values(), ids=KILLS.keys())
def test_kill_9_loses_no_flushed_record(qdir: Path, steps: list[list[object]]) -> None:
    report = run_child(qdir, steps)
    all_pushed = {i for op, *args in steps if op == "push" for i in range(*args)}
    flushed = set(report["flushed"])
    fifo, got = check_recovered(qdir, flushed, set(report["acked"]), all_pushed - flushed)
    for rid, _ in got:
        fifo.ack(rid)
    fifo.close()
    assert not qdir.exists()


def test_two_kills_in_a_row(qdir: Path) -> None:
    first = run_child(qdir, [["push", 0, 35], ["pop", 12], ["ack", 7], ["flush"]])
    second = run_child(
        qdir, [["pop", 20], ["ack", 15], ["push", 35, 52], ["pop", 3], ["ack", 1], ["flush"]]
    )
    acked = set(first["acked"]) | set(second["acked"])
    fifo, got = check_recovered(qdir, set(range(52)), acked, set())
    assert len(got) == 52 - len(acked)
    fifo.close()


# -- torn and corrupt files -----------------------------------------------------------------


def crashed_fifo(directory: Path, count: int) -> None:
    """A FIFO left by a kill -9 after ``count`` flushed pushes (nothing checkpointed)."""
    run_child(directory, [["push", 0, count], ["flush"]])


def record_offsets(path: Path) -> list[int]:
    """File offsets of the records of a segment (16-byte header, 8-byte record headers)."""
    data, pos, offsets = path.read_bytes(), 16, []
    while pos < len(data):
        offsets.append(pos)
        pos += 8 + int.from_bytes(data[pos : pos + 4], "little")
    return offsets


@pytest.mark.parametrize("crash", [True, False], ids=["after_kill", "after_close"])
def test_torn_last_segment_is_reported_and_the_rest_recovered(
    qdir: Path, caplog: pytest.LogCaptureFixture, crash: bool
) -> None:
    if crash:
        crashed_fifo(qdir, 25)
    else:
        with SegmentFifo(qdir, SEG) as fifo:
            for i in range(25):
                fifo.push(rec(i))
    last = qdir / "00000002.seg"
    cut = record_offsets(last)[3] + 5  # in the middle of the 4th record of segment 2
    os.truncate(last, cut)

    with caplog.at_level(logging.WARNING):
        fifo = SegmentFifo(qdir, SEG)
    assert fifo.corrupt_records == 1
    assert str(last) in caplog.text and f"offset {cut - 5}" in caplog.text
    assert len(fifo) == 23
    rid = fifo.push(b"after recovery")
    assert rid == 30  # a fresh segment, not after the torn tail
    got = drain(fifo)
    assert got == [(i, rec(i)) for i in range(23)] + [(30, b"after recovery")]
    fifo.close()

    caplog.clear()
    with caplog.at_level(logging.WARNING), SegmentFifo(qdir, SEG) as fifo:
        assert fifo.corrupt_records == 0  # reported once, not at every open
        assert [r for _, r in drain(fifo)] == [rec(i) for i in range(23)] + [b"after recovery"]
    assert "WARNING" not in caplog.text


def test_garbage_in_a_scanned_segment_cuts_that_segment_only(
    qdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    crashed_fifo(qdir, 35)
    middle = qdir / "00000001.seg"
    at = record_offsets(middle)[4] + 9  # payload of rid 14
    with open(middle, "r+b") as f:
        f.seek(at)
        f.write(b"\xff\xfe")

    with caplog.at_level(logging.WARNING):
        fifo = SegmentFifo(qdir, SEG)
    assert fifo.corrupt_records == 1
    assert str(middle) in caplog.text and "CRC mismatch" in caplog.text
    assert "cannot be trusted" in caplog.text
    expected = [i for i in range(35) if not 14 <= i < 20]
    assert len(fifo) == len(expected)
    assert [rid for rid, _ in drain(fifo)] == expected
    fifo.push(b"new")
    assert fifo.pop() == (40, b"new")
    fifo.close()


def test_garbage_in_a_checkpointed_segment_is_caught_when_read(
    qdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SegmentFifo(qdir, SEG) as fifo:
        for i in range(35):
            fifo.push(rec(i))
    middle = qdir / "00000001.seg"
    with open(middle, "r+b") as f:  # same size, so only reading can tell
        f.seek(record_offsets(middle)[2])
        f.write(b"\x00\x00\x00\x7f")  # an absurd length for rid 12

    with caplog.at_level(logging.WARNING), SegmentFifo(qdir, SEG) as fifo:
        got = drain(fifo)
        assert [rid for rid, _ in got] == [*range(12), *range(20, 35)]
        assert fifo.corrupt_records == 1
        assert (len(fifo), fifo.unacked) == (0, len(got))
        assert str(middle) in caplog.text and "impossible record length" in caplog.text
        for rid, _ in got:
            fifo.ack(rid)
    assert not qdir.exists()


def test_torn_or_garbled_ack_journal(qdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_child(qdir, [["push", 0, 12], ["pop", 6], ["ack", 4], ["flush"]])
    with open(qdir / "acks.log", "ab") as f:
        f.write(b"\x05" * 16 + b"\x01\x02\x03")  # one garbled entry, then a torn one
    with caplog.at_level(logging.WARNING), SegmentFifo(qdir, SEG) as fifo:
        assert "garbled ack" in caplog.text
        assert [rid for rid, _ in drain(fifo)] == list(range(4, 12))


# -- records kept in place: read by id, leases given back, stale copies dropped (#13) ---------


def test_read_at_hands_out_a_record_by_id_and_ack_accepts_it(qdir: Path) -> None:
    fifo = SegmentFifo(qdir, segment_records=SEG)
    placed = []
    for i in range(25):
        rid = fifo.push(rec(i))
        placed.append((rid, fifo.last_offset))
    rid, offset = placed[23]  # in the segment still being written (buffered)
    assert fifo.read_at(rid, offset) == rec(23)
    assert (len(fifo), fifo.unacked) == (24, 1)
    fifo.ack(rid)
    rid, offset = placed[2]  # a sealed segment
    assert fifo.read_at(rid, offset) == rec(2)
    fifo.close()  # rec(2) leased, never acked: it comes back; rec(23) does not
    fifo = SegmentFifo(qdir, segment_records=SEG)
    assert [r for _, r in drain(fifo)] == [rec(i) for i in range(25) if i != 23]
    fifo.close()


def test_release_keeps_a_popped_record_on_disk_without_a_write(qdir: Path) -> None:
    fifo = SegmentFifo(qdir, segment_records=SEG)
    for i in range(5):
        fifo.push(rec(i))
    fifo.close()
    fifo = SegmentFifo(qdir, segment_records=SEG)
    rid, _ = fifo.pop()
    offset = fifo.last_offset
    size = sum(p.stat().st_size for p in qdir.glob("*.seg"))
    fifo.release(rid)
    assert (len(fifo), fifo.unacked) == (5, 0)
    assert [r for _, r in drain(fifo)] == [rec(i) for i in range(1, 5)]  # not popped again
    assert sum(p.stat().st_size for p in qdir.glob("*.seg")) == size  # nothing rewritten
    assert fifo.read_at(rid, offset) == rec(0)
    fifo.ack(rid)
    fifo.close()
    fifo = SegmentFifo(qdir, segment_records=SEG)
    assert [r for _, r in drain(fifo)] == [rec(i) for i in range(1, 5)]
    fifo.close()


def test_discard_acks_a_record_never_handed_out(qdir: Path) -> None:
    fifo = SegmentFifo(qdir, segment_records=SEG)
    rids = [fifo.push(rec(i)) for i in range(4)]
    assert fifo.discard(rids[1]) and not fifo.discard(rids[1])
    assert len(fifo) == 3
    assert [r for _, r in drain(fifo)] == [rec(0), rec(2), rec(3)]
    fifo.flush()
    fifo.close()
    fifo = SegmentFifo(qdir, segment_records=SEG)
    assert [r for _, r in drain(fifo)] == [rec(0), rec(2), rec(3)]
    fifo.close()


def test_tail_is_what_was_written_after_the_last_checkpoint(tmp_path: Path) -> None:
    qdir = tmp_path / "fifo"
    run_child(qdir, [["push", 0, 12], ["checkpoint"], ["push", 12, 27], ["flush"]])
    fifo = SegmentFifo(qdir, segment_records=SEG)
    tail = [r for _, r in fifo.tail()]
    # the checkpoint knew segment 0 sealed; segments 1 and 2 were scanned
    assert tail == [rec(i) for i in range(10, 27)]
    fifo.close()
    fifo = SegmentFifo(qdir, segment_records=SEG)  # not settled by its owner: still the tail
    assert [r for _, r in fifo.tail()] == tail
    fifo.forget_tail()
    fifo.close()
    fifo = SegmentFifo(qdir, segment_records=SEG)
    assert list(fifo.tail()) == []
    fifo.close()
