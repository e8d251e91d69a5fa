"""The revisit store: every fetched page's next due time, on disk, ordered by due time."""

from __future__ import annotations

import heapq
import json
import logging
import math
import os
import shutil
import struct
import tempfile
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

from larbinscrapy.revisit.entry import Entry, frame, frames

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

_POS = struct.Struct("<qQI")  # cursor record: bucket, offset reached, entries consumed
_READ = 1 << 20


class RevisitStore:
    """Due-time ordered schedule with a bounded set of entries in flight (module docstring)."""

    def __init__(
        self,
        directory: str | None,
        bucket: float,
        clock: Callable[[], float] = time.time,
        legacy_width: float | None = None,
    ) -> None:
        if bucket <= 0:
            raise ValueError(f"LARBIN_REVISIT_BUCKET must be positive, got {bucket}")
        self.width = bucket
        self.legacy_width = legacy_width or bucket  # the width of a checkpoint that names none
        self.closed_cleanly = False  # the last run closed the store (its flight is in the frontier)
        self._clean = False  # close() is writing its checkpoint
        self.clock = clock
        self._temporary = directory is None
        self.dir = Path(directory or tempfile.mkdtemp(prefix="larbin-revisit-"))
        self.sizes: dict[int, list[int]] = {}  # bucket -> [bytes on disk, entries]
        self._heap: list[int] = []
        self._buffers: dict[int, bytearray] = {}
        self.flight: dict[bytes, tuple[Entry, float]] = {}  # fp -> (entry, taken at)
        self.cursor = (-1, 0)  # bucket being drained, offset reached in it
        self.epoch = 0
        self._journal = -1
        self._dirty = True  # journal written since the last checkpoint
        self.duplicates = 0  # entries found twice in the schedule (dropped at take time)
        self.recovered = 0

    # -- lifecycle ----------------------------------------------------------------------
    def open(self) -> None:
        self._clean = False
        self.dir.mkdir(parents=True, exist_ok=True)
        self._recover()
        self.checkpoint()

    def close(self) -> None:
        if self._journal < 0:
            return
        self._clean = self._dirty = True
        self.checkpoint()
        os.close(self._journal)
        self._journal = -1
        if self._temporary:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __len__(self) -> int:
        """Pages with a schedule (waiting or in flight)."""
        return sum(count for _, count in self.sizes.values()) + len(self.flight)

    def next_due(self) -> float | None:
        """When the oldest bucket's window ends (its pages can be taken), or ``None``."""
        return (self._heap[0] + 1) * self.width if self._heap else None

    # -- the schedule -------------------------------------------------------------------
    def add(self, entry: Entry) -> None:
        """Schedule a page seen for the first time."""
        self._log(b"A" + entry.pack())
        self._append(entry)

    def done(self, entry: Entry) -> None:
        """A page in flight was fetched (or failed): forget the flight, schedule ``entry``."""
        self.flight.pop(entry.fp, None)
        self._log(b"D" + entry.pack())
        self._append(entry)

    def forget(self, entry: Entry) -> None:
        """A page in flight is not revisited any more (it is gone): drop it from the schedule."""
        self.flight.pop(entry.fp, None)
        self._log(b"F" + entry.pack())

    def in_flight(self, fp: bytes) -> Entry | None:
        held = self.flight.get(fp)
        return held[0] if held is not None else None

    def inflight(self) -> list[Entry]:
        return [entry for entry, _ in self.flight.values()]

    def take_due(self, now: float, limit: int) -> list[Entry]:
        """Move up to ``limit`` entries of passed buckets into flight; return them."""
        taken: list[Entry] = []
        while len(taken) < limit and self._heap and (self._heap[0] + 1) * self.width <= now:
            bucket = self._heap[0]
            if self.cursor[0] != bucket:
                self.cursor = (bucket, 0)
            self._flush_bucket(bucket)
            got, offset = self._read(bucket, self.cursor[1], limit - len(taken))
            records = bytearray()
            for entry in got:
                if entry.fp in self.flight:
                    self.duplicates += 1
                    continue
                self.flight[entry.fp] = (entry, now)
                records += frame(b"T" + entry.pack())
                taken.append(entry)
            self.sizes[bucket][1] = max(0, self.sizes[bucket][1] - len(got))
            self.cursor = (bucket, offset)
            # the cursor after its entries: a torn batch re-reads them (dropped as duplicates)
            records += frame(b"C" + _POS.pack(bucket, offset, len(got)))
            self._write(bytes(records))
            if offset >= self.sizes[bucket][0]:
                self._drop_bucket(bucket)
        return taken

    def expired(self, now: float, lease: float) -> list[Entry]:
        """Entries in flight for longer than ``lease`` seconds (lost by the frontier)."""
        return [entry for entry, since in self.flight.values() if now - since > lease]

    # -- files --------------------------------------------------------------------------
    def _bucket_of(self, due: float) -> int:
        return max(math.floor(due / self.width), self.cursor[0] + 1)

    def _path(self, bucket: int) -> Path:
        return self.dir / f"{bucket:016d}.due"

    def _append(self, entry: Entry) -> None:
        bucket = self._bucket_of(entry.due)
        if bucket not in self.sizes:
            self.sizes[bucket] = [0, 0]
            heapq.heappush(self._heap, bucket)
        self.sizes[bucket][1] += 1
        self._buffers.setdefault(bucket, bytearray()).extend(frame(entry.pack()))

    def _flush_bucket(self, bucket: int) -> None:
        data = self._buffers.pop(bucket, None)
        if data:
            with open(self._path(bucket), "ab") as f:
                f.write(data)
            self.sizes[bucket][0] += len(data)

    def _read(self, bucket: int, offset: int, limit: int) -> tuple[list[Entry], int]:
        try:
            with open(self._path(bucket), "rb") as f:
                f.seek(offset)
                data = f.read(_READ)
        except FileNotFoundError:
            data = b""
        entries = []
        end = 0
        for end, payload in frames(data, limit):  # noqa: B007 (end: where the last one ends)
            entries.append(Entry.unpack(payload))
        if not entries and offset < self.sizes[bucket][0]:
            logger.warning(
                "revisit: unreadable record in %s at %d: bucket skipped", self._path(bucket), offset
            )
            return [], self.sizes[bucket][0]
        return entries, offset + end

    def _drop_bucket(self, bucket: int) -> None:
        heapq.heappop(self._heap)
        self.sizes.pop(bucket, None)
        self._path(bucket).unlink(missing_ok=True)

    def _log(self, payload: bytes) -> None:
        self._write(frame(payload))

    def _write(self, data: bytes) -> None:
        if self._journal < 0:
            raise RuntimeError("RevisitStore used before open()")
        view = memoryview(data)
        while view:  # unbuffered: in the OS once this returns
            view = view[os.write(self._journal, view) :]
        self._dirty = True

    # -- checkpoint and recovery -----------------------------------------------------------
    def checkpoint(self) -> None:
        """Flush the buckets, start a new journal, replace the checkpoint, drop the old journal."""
        if not self._dirty:
            return
        for bucket in list(self._buffers):
            self._flush_bucket(bucket)
        old = self._journal
        self.epoch += 1
        self._journal = os.open(
            self._journal_path(self.epoch),
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC,
            0o644,
        )
        head = {
            "epoch": self.epoch,
            "width": self.width,
            "clean": self._clean,
            "cursor": list(self.cursor),
            "buckets": [[b, size, count] for b, (size, count) in sorted(self.sizes.items())],
        }
        body = (json.dumps(head, separators=(",", ":")) + "\n").encode()
        body += b"".join(frame(entry.pack()) for entry, _ in self.flight.values())
        body += struct.pack("<I", zlib.crc32(body))
        tmp = self.dir / "checkpoint.tmp"
        with open(tmp, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / "checkpoint")
        if old >= 0:
            os.close(old)
        self._journal_path(self.epoch - 1).unlink(missing_ok=True)
        self._dirty = False

    def _journal_path(self, epoch: int) -> Path:
        return self.dir / f"journal.{epoch}"

    def _recover(self) -> None:
        path = self.dir / "checkpoint"
        if path.exists():
            self._load_checkpoint(path.read_bytes())
        for name in os.listdir(self.dir):
            if name.endswith(".due"):
                bucket = int(name[:-4])
                known = self.sizes.get(bucket)
                if known is None:  # created after the checkpoint (or drained): re-derived
                    self._path(bucket).unlink()
                elif os.path.getsize(self.dir / name) > known[0]:
                    os.truncate(self.dir / name, known[0])
            elif name.startswith("journal.") and name != f"journal.{self.epoch}":
                (self.dir / name).unlink()
        self._replay(self._journal_path(self.epoch))
        self._heap = sorted(self.sizes)
        if len(self):
            logger.info(
                "revisit: %d scheduled pages (%d in flight) in %s",
                len(self),
                len(self.flight),
                self.dir,
            )

    def _load_checkpoint(self, data: bytes) -> None:
        body, (crc,) = data[:-4], struct.unpack("<I", data[-4:])
        if zlib.crc32(body) != crc:
            raise ValueError(f"{self.dir / 'checkpoint'}: CRC mismatch (a disk error)")
        line, _, rest = body.partition(b"\n")
        head = json.loads(line)
        self.epoch = head["epoch"]
        width = head.get("width", self.legacy_width)
        if width != self.width:
            logger.info(
                "revisit: %s was written with %s s buckets: kept (this run asks for %s)",
                self.dir,
                width,
                self.width,
            )
            self.width = width
        self.closed_cleanly = bool(head.get("clean"))
        self.cursor = (head["cursor"][0], head["cursor"][1])
        self.sizes = {b: [size, count] for b, size, count in head["buckets"]}
        now = self.clock()
        for _, payload in frames(rest):
            entry = Entry.unpack(payload)
            self.flight[entry.fp] = (entry, now)

    def _replay(self, path: Path) -> None:
        if not path.exists():
            return
        data = path.read_bytes()
        now, end = self.clock(), 0
        for end, payload in frames(data):  # noqa: B007 (end: where the last one ends)
            kind = bytes(payload[:1])
            if kind == b"C":
                bucket, offset, consumed = _POS.unpack_from(payload, 1)
                self.cursor = (bucket, offset)
                if bucket in self.sizes:
                    self.sizes[bucket][1] = max(0, self.sizes[bucket][1] - consumed)
                continue
            entry = Entry.unpack(payload[1:])
            self.recovered += 1
            if kind == b"T":
                self.flight[entry.fp] = (entry, now)
                continue
            if kind == b"F":
                self.flight.pop(entry.fp, None)
                continue
            if kind == b"D":
                self.flight.pop(entry.fp, None)
            self._append(entry)
        if end < len(data):
            logger.warning("revisit journal: cut %d bytes of a torn last record", len(data) - end)
        for bucket in [b for b in self.sizes if b < self.cursor[0]]:  # drained after the journal
            self.sizes.pop(bucket)
            self._buffers.pop(bucket, None)
            self._path(bucket).unlink(missing_ok=True)
