"""The frontier's four FIFOs: their layout, and the repairs made once when they are opened.

A tier's main FIFO and its wait FIFO (larbin's URLsPriority/URLsPriorityWait and
URLsDisk/URLsDiskWait); a record moved to a wait FIFO carries the id of the main record it
replaces (``MOVED``), so a crash between the move and the ack is repaired at the next open.
"""

from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Any

from larbinscrapy.frontier.segments import SegmentFifo

if TYPE_CHECKING:
    from pathlib import Path

logger = logging.getLogger(__name__)

# FIFO indexes: a tier's main FIFO and its wait FIFO.
PRIORITY, PRIORITY_WAIT, NORMAL, NORMAL_WAIT = range(4)
FIFO_NAMES = ("priority", "priority-overflow", "normal", "normal-overflow")
# What the status page and the log line call them: their directories' names (larbin's
# URLsPriority, URLsPriorityWait, URLsDisk, URLsDiskWait), one name everywhere.
FIFO_LABELS = FIFO_NAMES
LEGACY_WAIT = {"priority-wait": PRIORITY, "normal-wait": NORMAL}  # before source ids
WAIT_OF = {PRIORITY: PRIORITY_WAIT, NORMAL: NORMAL_WAIT}
SOURCE_OF = {PRIORITY_WAIT: PRIORITY, NORMAL_WAIT: NORMAL}
# Records only move from a main FIFO to its wait FIFO (push there, ack here): the wait FIFOs
# are flushed first, and the acks of moved records are written only after that flush.
FLUSH_ORDER = (PRIORITY_WAIT, NORMAL_WAIT, PRIORITY, NORMAL)
MOVED = struct.Struct("<Q")  # a wait record's prefix: the id of the main record it replaces


def adopt_legacy_wait(directory: Path, fifos: list[SegmentFifo], segment_records: int) -> None:
    """Move the records of an older version's wait FIFO into its tier, once.

    Pushed and flushed there before the old FIFO is closed: a crash in between queues
    them twice (the dupefilter does not see queued records), never loses one.
    """
    for name, index in LEGACY_WAIT.items():
        path = directory / name
        if not path.is_dir():
            continue
        legacy, moved = SegmentFifo(path, segment_records), 0
        while (popped := legacy.pop()) is not None:
            fifos[index].push(popped[1])
            legacy.ack(popped[0])
            moved += 1
        fifos[index].flush()
        legacy.close()
        logger.info(
            "Moved %d queued URLs from %s (an older layout) to %s", moved, name, FIFO_NAMES[index]
        )


def settle_tails(fifos: list[SegmentFifo], stats: Any) -> list[bytes]:
    """After a crash, what recovery found past each FIFO's last checkpoint, read once.

    The main copy of every record moved to a wait FIFO whose ack did not reach the disk is
    dropped (both copies would be fetched). The payloads of all the unacked records there are
    returned: the only ones whose URL's seen bit may not have reached the disk (records are
    written first), for the resumed crawl to mark seen before a page that comes back yields
    them twice (a main FIFO's stale copies among them: their URLs are queued all the same).
    """
    payloads = [record for index in SOURCE_OF.values() for _, record in fifos[index].tail()]
    for wait, source in SOURCE_OF.items():
        stale = 0
        for _, record in fifos[wait].tail():
            (src,) = MOVED.unpack_from(record)
            stale += fifos[source].discard(src)
            payloads.append(record[MOVED.size :])
        fifos[source].flush()  # the discards reach the OS before the tail is forgotten
        fifos[wait].forget_tail()
        if stale:
            stats.inc_value("larbin/frontier/stale_copies", stale)
            logger.info(
                "%s: dropped %d stale copies of records moved to %s before the crash",
                FIFO_NAMES[source],
                stale,
                FIFO_NAMES[wait],
            )
    return payloads
