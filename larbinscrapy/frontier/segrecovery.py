"""Recovery and files of a ``SegmentFifo``: what an open finds on disk, the checkpoint, the lock."""

from __future__ import annotations

import base64
import errno
import fcntl
import logging
import os
import zlib
from typing import TYPE_CHECKING, Any

from larbinscrapy.frontier.segfile import (
    ACK,
    ACK_MASK,
    MAGIC,
    SEG_HEADER,
    Segment,
    read_state,
    scan_records,
    truncate_segment,
    unlink,
    write_state,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from larbinscrapy.frontier.segments import ReadCursor

logger = logging.getLogger(__name__)

STATE = "state.json"
ACKS = "acks.log"
LOCK = "lock"
SUFFIX = ".seg"


class SegmentFiles:
    """A segment FIFO's directory: recovery at open, checkpoint state, file names, the lock."""

    directory: str
    corrupt_records: int
    _n: int
    _segments: dict[int, Segment]
    _next_no: int
    _created_dir: bool
    _ready: int
    _r: ReadCursor  # the reader's place
    _scanned: list[int]
    _lock_fd: int

    # -- recovery and state -------------------------------------------------------------

    def _recover(self) -> None:
        state = self._read_state()
        known: dict[int, dict[str, Any]] = {}
        if state is not None:
            self._adopt_segment_records(int(state["segment_records"]), "state.json")
            self._next_no = int(state["next_segment"])
            self._created_dir = self._created_dir or bool(state.get("own_directory"))
            known = {int(e["no"]): e for e in state["segments"]}
        on_disk = sorted(self._segment_files())
        for no in on_disk:
            if no < self._next_no and no not in known:
                unlink(self._seg_path(no))  # deleted at a checkpoint, crash before unlink
                continue
            self._segments[no] = self._load_segment(no, known.get(no))
        for no, entry in known.items():
            if no not in self._segments:
                lost = int(entry.get("records", 0))
                logger.warning("%s is missing: its records are lost", self._seg_path(no))
                self.corrupt_records += lost
        if on_disk:
            self._next_no = max(self._next_no, on_disk[-1] + 1)
        self._replay_acks()
        self._ready = sum(s.count - s.acked_count for s in self._segments.values())
        self._r.no = next(iter(self._segments), self._next_no)
        if self._segments:
            logger.info(
                "reopened %s: %d segment(s), %d record(s) to pop, %d corrupt",
                self.directory,
                len(self._segments),
                self._ready,
                self.corrupt_records,
            )

    def _load_segment(self, no: int, entry: dict[str, Any] | None) -> Segment:
        """A segment from the checkpoint if it was sealed there, else by scanning its file."""
        path = self._seg_path(no)
        if entry is not None and "records" in entry:
            count, nbytes = int(entry["records"]), int(entry["bytes"])
            if os.path.getsize(path) >= nbytes:
                seg = Segment(no, count, sealed=True, nbytes=nbytes)
                if entry.get("tail"):  # scanned by an earlier open, its tail not settled yet
                    self._scanned.append(no)
            else:
                seg = self._scan_segment(no)  # shorter than checkpointed: find the cut
                self._scanned.append(no)
        else:
            seg = self._scan_segment(no)
            self._scanned.append(no)
        if entry is not None and entry.get("acked"):
            bitmap = bytearray(zlib.decompress(base64.b64decode(entry["acked"])))
            bitmap.extend(bytes(max(0, ((self._n + 7) >> 3) - len(bitmap))))
            seg.acked = bitmap
            truncate_segment(seg, seg.count, seg.nbytes)  # drop bits past a cut, recount
        return seg

    def _scan_segment(self, no: int) -> Segment:
        """Count the valid records of a segment file, stopping at the first bad one."""
        path = self._seg_path(no)
        count, offset, error = 0, 0, None
        with open(path, "rb", buffering=0) as f:
            head = f.read(SEG_HEADER.size)
            if not head:
                return Segment(no, 0, sealed=True, nbytes=0)  # killed before the first flush
            if len(head) < SEG_HEADER.size:
                error = "truncated segment header"
            else:
                magic, seg_records, seg_no = SEG_HEADER.unpack(head)
                if magic != MAGIC or seg_no != no:
                    error = "not a segment file (bad header)"
                else:
                    self._adopt_segment_records(seg_records, path)
                    offset = SEG_HEADER.size
                    count, offset, error = scan_records(f, offset)
        if error is not None:
            logger.warning(
                "%s: %s at offset %d after %d good record(s): the rest of this segment "
                "cannot be trusted after a torn or corrupt write and is skipped",
                path,
                error,
                offset,
                count,
            )
            self.corrupt_records += 1
        return Segment(no, count, sealed=True, nbytes=offset)

    def _adopt_segment_records(self, value: int, where: str) -> None:
        if value != self._n:
            logger.warning(
                "%s was written with segment_records=%d, not %d: keeping %d",
                where,
                value,
                self._n,
                value,
            )
            self._n = value

    def _replay_acks(self) -> None:
        """Apply the ack journal; a torn last entry is dropped (that record comes back)."""
        path = self._path(ACKS)
        if not os.path.exists(path):
            return
        bad = 0
        with open(path, "rb") as f:
            while True:
                chunk = f.read(ACK.size * 65536)
                usable = len(chunk) - len(chunk) % ACK.size
                for rid, check in ACK.iter_unpack(chunk[:usable]):
                    if check != rid ^ ACK_MASK:
                        bad += 1
                        continue
                    self._set_acked(rid)
                if len(chunk) < ACK.size * 65536:
                    break
        if bad:
            logger.warning("%s: %d garbled ack entr(y/ies) ignored", path, bad)

    def _set_acked(self, rid: int) -> None:
        no, idx = divmod(rid, self._n)
        seg = self._segments.get(no)
        if seg is None or idx >= seg.count:
            return
        if seg.acked is None:
            seg.acked = bytearray((self._n + 7) >> 3)
        mask = 1 << (idx & 7)
        if not seg.acked[idx >> 3] & mask:
            seg.acked[idx >> 3] |= mask
            seg.acked_count += 1

    def _read_state(self) -> dict[str, Any] | None:
        return read_state(self._path(STATE))

    def _write_state(self) -> None:
        segments = []
        for seg in self._segments.values():
            entry: dict[str, Any] = {"no": seg.no}
            if seg.no in self._scanned:
                entry["tail"] = 1  # kept in tail() until forget_tail(), across crashes
            if seg.sealed:
                entry["records"] = seg.count
                entry["bytes"] = seg.nbytes
            if seg.acked_count:
                entry["acked"] = base64.b64encode(zlib.compress(seg.acked, 1)).decode()  # type: ignore[arg-type]
            segments.append(entry)
        state = {
            "format": 1,
            "segment_records": self._n,
            "next_segment": self._next_no,
            "own_directory": self._created_dir,  # so the last close removes it
            "segments": segments,
        }
        write_state(self._path(STATE), state)

    # -- files --------------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def _seg_path(self, no: int) -> str:
        return os.path.join(self.directory, f"{no:08d}{SUFFIX}")

    def _segment_files(self) -> Iterator[int]:
        for name in os.listdir(self.directory):
            stem, dot, ext = name.partition(".")
            if dot and "." + ext == SUFFIX and stem.isdigit():
                yield int(stem)

    def _lock(self) -> int:
        fd = os.open(self._path(LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise RuntimeError(f"{self.directory} is open in another SegmentFifo") from exc
            raise
        return fd

    def _unlock(self, remove: bool) -> None:
        if remove:
            unlink(self._path(LOCK))
        os.close(self._lock_fd)
