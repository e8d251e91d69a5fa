"""larbin's ``PersistentFifo``, made crash-safe: a disk FIFO of opaque byte records that are only
forgotten once acknowledged (files: docs/modules.md, "The frontier")."""

from __future__ import annotations

import errno
import logging
import os
import zlib
from typing import TYPE_CHECKING, BinaryIO

from larbinscrapy.frontier.segfile import (
    ACK,
    ACK_MASK,
    HDR,
    MAGIC,
    MAX_RECORD,
    READ_CHUNK,
    REC_HEADER,
    SEG_HEADER,
    Segment,
    frames,
    popcount,
    read_frame,
    truncate_segment,
    unlink,
)
from larbinscrapy.frontier.segrecovery import ACKS, STATE, SegmentFiles

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType

logger = logging.getLogger(__name__)
OUT_OF_FDS = (errno.EMFILE, errno.ENFILE)
EMFILE_RETRIES = 5  # checkpoints in a row put off for want of descriptors, then a failure


class _Deferred(Exception):
    """A checkpoint put off (``SegmentFifo._write_state_or_defer``)."""


_pack_header = REC_HEADER.pack
_unpack_header = REC_HEADER.unpack_from
_crc32 = zlib.crc32
_WRITE_BUFFER = 256 * 1024


class ReadCursor:
    """Where ``SegmentFifo``'s reader is: its segment and file, and the bytes read ahead."""

    __slots__ = ("base", "buf", "file", "idx", "no", "pos", "seg")

    def __init__(self) -> None:
        self.no = 0  # segment number
        self.idx = 0  # record index in it
        self.seg: Segment | None = None
        self.file: BinaryIO | None = None
        self.buf = b""
        self.pos = 0
        self.base = 0  # file offset of buf[0]


class SegmentFifo(SegmentFiles):
    """Crash-safe FIFO of byte records in append-only segment files, with leases and acks.

    ``push`` appends (buffered), ``pop`` hands out the next record and leases it, ``ack``
    journals that it is done. ``flush`` makes everything so far survive a ``kill -9``;
    ``checkpoint`` also compacts the journal and deletes fully acked segments. Not thread-safe:
    the scheduler owns it.
    """

    def __init__(self, directory: str | os.PathLike[str], segment_records: int = 10_000) -> None:
        if segment_records < 1:
            raise ValueError(f"segment_records must be >= 1, got {segment_records}")
        self.directory = os.fspath(directory)
        self.corrupt_records = 0
        self._created_dir = not os.path.isdir(self.directory)
        os.makedirs(self.directory, exist_ok=True)
        self._lock_fd = self._lock()
        self._n = segment_records
        self._segments: dict[int, Segment] = {}  # live segments in segment-number order
        self._next_no = 0  # number of the next segment to create
        self._ready = 0  # on disk, not handed out, not acked
        self._unacked = 0  # handed out (popped or read_at) and not acked
        self._reads: set[int] = set()  # ids handed out by read_at, not acked yet
        self._scanned: list[int] = []  # segments written past a checkpoint, until forget_tail()
        self.last_offset = 0  # file offset of the record last pushed or popped (for read_at)
        self._closed = False
        self._emfile_in_a_row = 0  # checkpoints put off for want of descriptors
        self._emfile_logged = False
        # writer
        self._wseg: Segment | None = None
        self._wfile: BinaryIO | None = None
        self._r = ReadCursor()  # the reader's place: record id = no * _n + idx
        self._recover()
        self.resumed_end = self._next_no * self._n  # ids below: written before this open
        self._afile: BinaryIO = open(self._path(ACKS), "ab", buffering=64 * 1024)  # noqa: SIM115
        self.checkpoint()

    # -- public API ---------------------------------------------------------------------

    def push(self, record: bytes) -> int:
        """Append a record; return its id. Buffered: call ``flush`` to make it crash-safe."""
        seg = self._wseg
        if seg is None:
            seg = self._start_segment()
        n = len(record)
        if n > MAX_RECORD:
            raise ValueError(f"record of {n} bytes is larger than {MAX_RECORD}")
        wfile = self._wfile
        wfile.write(_pack_header(n, _crc32(record, n)))  # type: ignore[union-attr]
        wfile.write(record)  # type: ignore[union-attr]
        self.last_offset = seg.nbytes
        seg.nbytes += HDR + n
        idx = seg.count
        seg.count = idx + 1
        self._ready += 1
        if idx + 1 == self._n:
            self._seal_writer()
        return seg.no * self._n + idx

    def pop(self, before: int | None = None) -> tuple[int, bytes] | None:
        """Next record not popped since open, leased until ``ack``; None when empty.

        ``before``: stop at the first record whose id is not below it (``resumed_end`` reads
        only what an earlier process wrote).
        """
        while True:
            seg = self._r.seg
            if seg is None:
                seg = self._open_reader()
                if seg is None:
                    return None
            idx = self._r.idx
            if idx >= seg.count:
                if not seg.sealed:
                    return None  # caught up with the writer
                self._advance_reader()
                continue
            if before is not None and seg.no * self._n + idx >= before:
                return None
            self.last_offset = self._r.base + self._r.pos
            record = self._read_record(seg)
            if record is None:
                continue  # corrupt: the rest of the segment was dropped
            self._r.idx = idx + 1
            bitmap = seg.acked
            if bitmap is not None and bitmap[idx >> 3] & (1 << (idx & 7)):
                continue  # acked before the last crash or close
            self._ready -= 1
            self._unacked += 1
            return seg.no * self._n + idx, record

    def ack(self, rid: int) -> None:
        """Mark a handed-out record done (journaled). Unknown, not handed out or acked ids are
        ignored."""
        no, idx = divmod(rid, self._n)
        seg = self._segments.get(no)
        if seg is None or idx >= seg.count or rid < 0:
            return
        if rid in self._reads:
            self._reads.discard(rid)
        elif no > self._r.no or (no == self._r.no and idx >= self._r.idx):
            return  # not popped (a lease is only what pop() or read_at() handed out)
        bitmap = seg.acked
        if bitmap is None:
            bitmap = seg.acked = bytearray((self._n + 7) >> 3)
        mask = 1 << (idx & 7)
        if bitmap[idx >> 3] & mask:
            return
        bitmap[idx >> 3] |= mask
        seg.acked_count += 1
        self._unacked -= 1
        self._afile.write(ACK.pack(rid, rid ^ ACK_MASK))

    def read_at(self, rid: int, offset: int) -> bytes | None:
        """The record ``rid`` at file ``offset`` (from ``last_offset``), leased until ``ack``.

        Random access for records kept on disk while their id waits elsewhere (a crowded
        site's overflow). None, and the record counted as corrupt and dropped, if it is bad.
        """
        no, idx = divmod(rid, self._n)
        seg = self._segments.get(no)
        if seg is None or idx >= seg.count or seg.is_acked(idx):
            return None
        if seg is self._wseg:
            self._wfile.flush()  # type: ignore[union-attr]
        record = read_frame(self._seg_path(no), offset)
        self._ready -= 1
        self._unacked += 1
        self._reads.add(rid)
        if record is None:
            logger.warning(
                "%s: bad record %d at offset %d: dropped", self._seg_path(no), rid, offset
            )
            self.corrupt_records += 1
            self.ack(rid)
        return record

    def lease(self, rid: int) -> None:
        """Hand out the record just pushed as ``rid`` without reading it back: its owner kept
        it (a site's queue in memory). Acked like any other lease."""
        self._ready -= 1
        self._unacked += 1
        self._reads.add(rid)

    def release(self, rid: int) -> None:
        """Give a popped record's lease back without a write: it stays on disk, unacked, and
        is handed out again only by ``read_at`` (or by ``pop`` after the next open)."""
        self._unacked -= 1
        self._ready += 1
        self._reads.discard(rid)

    def discard(self, rid: int) -> bool:
        """Ack a record that is not handed out (a stale copy, a dropped URL): ``pop`` skips
        it. False if it was acked already (or is unknown)."""
        no, idx = divmod(rid, self._n)
        seg = self._segments.get(no)
        if seg is None or idx >= seg.count or rid < 0 or seg.is_acked(idx):
            return False
        self._set_acked(rid)
        self._ready -= 1
        self._afile.write(ACK.pack(rid, rid ^ ACK_MASK))
        return True

    def tail(self) -> Iterator[tuple[int, bytes]]:
        """(id, record) of the unacked records recovery found beyond the last checkpoint.

        Those are the only records whose companion writes elsewhere (an ack in another FIFO)
        may not have reached the disk before a crash. They stay in the tail, across further
        crashes, until ``forget_tail()``.
        """
        for no in self._scanned:
            seg = self._segments.get(no)
            if seg is None or not seg.count:
                continue
            with open(self._seg_path(no), "rb") as f:
                data = f.read(seg.nbytes)
            for idx, (_, record) in enumerate(frames(data, SEG_HEADER.size, seg.count)):
                if not seg.is_acked(idx):
                    yield no * self._n + idx, record

    def forget_tail(self) -> None:
        """The owner settled ``tail()`` durably: the next checkpoint forgets it."""
        self._scanned = []

    def flush(self) -> None:
        """Hand buffered records and acks to the OS: a ``kill -9`` after this loses none."""
        if self._wfile is not None:
            self._wfile.flush()
        self._afile.flush()

    def checkpoint(self) -> None:
        """Flush, write the state atomically, compact the ack journal, delete acked segments."""
        self.flush()
        dead = [s for s in self._segments.values() if s.sealed and s.acked_count >= s.count]
        try:
            self._write_state_or_defer(dead)
        except _Deferred:
            return
        for seg in dead:
            if seg is self._r.seg:
                self._close_reader()
        acks = open(self._path(ACKS), "wb", buffering=64 * 1024)  # noqa: SIM115
        self._afile.close()  # opened first: when the open fails, the journal is still open
        self._afile = acks
        for seg in dead:
            unlink(self._seg_path(seg.no))
        if dead:
            logger.debug("deleted %d fully acked segment(s) in %s", len(dead), self.directory)

    def _write_state_or_defer(self, dead: list[Segment]) -> None:
        """Write the state without the ``dead`` segments; ``_Deferred`` when the process is
        out of descriptors (EMFILE) fewer than ``EMFILE_RETRIES`` checkpoints in a row: the
        journals stay as they are and the next checkpoint tries again (the crawl slows, goes
        on); after that the ``OSError`` stops the crawl as any failed write does."""
        for seg in dead:
            del self._segments[seg.no]
        try:
            self._write_state()
        except OSError as exc:
            self._segments = dict(sorted({**self._segments, **{s.no: s for s in dead}}.items()))
            if exc.errno not in OUT_OF_FDS or self._emfile_in_a_row >= EMFILE_RETRIES:
                raise
            self._emfile_in_a_row += 1
            log = logger.debug if self._emfile_logged else logger.warning
            self._emfile_logged = True
            log(
                "Checkpoint of %s put off: %s (try %d of %d; later ones at DEBUG)",
                self.directory,
                exc.strerror,
                self._emfile_in_a_row,
                EMFILE_RETRIES,
            )
            raise _Deferred from exc
        self._emfile_in_a_row = 0

    def close(self) -> None:
        """Checkpoint and close; remove the files when no record is left unacked."""
        if self._closed:
            return
        self._seal_writer()
        self.checkpoint()
        self._close_reader()
        self._afile.close()
        self._closed = True
        if not self._segments:
            for name in (STATE, ACKS):
                unlink(self._path(name))
        else:
            logger.info(
                "%s closed with %d record(s) queued and %d leased (back on next open)",
                self.directory,
                self._ready,
                self._unacked,
            )
        self._unlock(remove=not self._segments)
        if not self._segments and self._created_dir:
            try:
                os.rmdir(self.directory)
            except OSError as exc:  # something else lives there: leave it
                logger.debug("kept %s: %s", self.directory, exc)

    def __len__(self) -> int:
        return self._ready

    @property
    def unacked(self) -> int:
        """Records popped and not acked yet (leases)."""
        return self._unacked

    def __enter__(self) -> SegmentFifo:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writer -------------------------------------------------------------------------

    def _start_segment(self) -> Segment:
        no = self._next_no
        self._next_no += 1
        seg = Segment(no)
        self._segments[no] = seg
        self._wfile = open(self._seg_path(no), "wb", buffering=_WRITE_BUFFER)  # noqa: SIM115
        self._wfile.write(SEG_HEADER.pack(MAGIC, self._n, no))
        seg.nbytes = SEG_HEADER.size
        self._wseg = seg
        return seg

    def _seal_writer(self) -> None:
        """Close the write segment: from now on its record count is final."""
        seg, wfile = self._wseg, self._wfile
        if seg is None or wfile is None:
            return
        wfile.close()
        seg.sealed = True
        self._wseg = self._wfile = None

    # -- reader -------------------------------------------------------------------------

    def _open_reader(self) -> Segment | None:
        """Position the reader on the first live segment at or after the cursor."""
        for no, seg in self._segments.items():
            if no >= self._r.no:
                self._r.no, self._r.idx = no, 0  # a live segment is never reopened mid-way
                self._r.seg = seg
                self._r.file = open(self._seg_path(no), "rb", buffering=0)  # noqa: SIM115
                self._r.base = SEG_HEADER.size
                self._r.file.seek(self._r.base)
                self._r.buf, self._r.pos = b"", 0
                return seg
        return None

    def _advance_reader(self) -> None:
        self._close_reader()
        self._r.no += 1
        self._r.idx = 0

    def _close_reader(self) -> None:
        if self._r.file is not None:
            self._r.file.close()
        self._r.file = self._r.seg = None
        self._r.buf, self._r.pos = b"", 0

    def _fill(self, need: int, seg: Segment) -> bool:
        """Make at least ``need`` unread bytes available in the read buffer."""
        buf = self._r.buf[self._r.pos :]
        self._r.base += self._r.pos
        self._r.pos = 0
        flushed = False
        while len(buf) < need:
            chunk = self._r.file.read(max(READ_CHUNK, need - len(buf)))  # type: ignore[union-attr]
            if chunk:
                buf += chunk
            elif seg is self._wseg and not flushed:
                self._wfile.flush()  # type: ignore[union-attr]  # reader caught up with writer
                flushed = True
            else:
                break
        self._r.buf = buf
        return len(buf) >= need

    def _read_record(self, seg: Segment) -> bytes | None:
        """The record at the read position, or None (and the segment cut) if it is bad."""
        buf, pos = self._r.buf, self._r.pos
        if pos + HDR > len(buf):
            if not self._fill(HDR, seg):
                return self._corrupt(seg, "truncated record header")
            buf, pos = self._r.buf, 0
        n, crc = _unpack_header(buf, pos)
        end = pos + HDR + n
        if end > len(buf):
            if n > MAX_RECORD:
                return self._corrupt(seg, f"impossible record length {n}")
            if not self._fill(HDR + n, seg):
                return self._corrupt(seg, "truncated record")
            buf, pos, end = self._r.buf, 0, HDR + n
        record = buf[pos + HDR : end]
        if _crc32(record, n) != crc:
            return self._corrupt(seg, "CRC mismatch")
        self._r.pos = end
        return record

    def _corrupt(self, seg: Segment, why: str) -> bytes | None:
        """Cut a segment found bad while reading: later records in it cannot be trusted."""
        idx = self._r.idx
        lost = seg.count - idx
        if seg.acked is not None:
            lost -= popcount(seg.acked, idx, seg.count)
        logger.warning(
            "%s: %s at offset %d (record %d): dropping the %d unacked record(s) after it "
            "in this segment, which cannot be trusted after a bad record",
            self._seg_path(seg.no),
            why,
            self._r.base + self._r.pos,
            seg.no * self._n + idx,
            lost,
        )
        self.corrupt_records += 1
        self._ready -= lost
        truncate_segment(seg, idx, self._r.base + self._r.pos)
        if seg is self._wseg:
            self._seal_writer()  # never append after a bad record
        seg.sealed = True
        return None
