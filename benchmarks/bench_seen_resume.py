"""Memory a resume spends loading the seen-set snapshot (issue 34, point 5).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_seen_resume.py

Writes a snapshot (a 2^27-bit bitmap: 16 MiB; a scalable chain sized for 4M URLs), then opens
a dupefilter on it and reports the peak of Python's traced allocations during ``open()``: the
bit arrays themselves exist before (they are built with the dupefilter), so what it measures is
what the load adds.
"""

from __future__ import annotations

import tempfile
import tracemalloc
from pathlib import Path

from twisted.internet.task import Clock

from larbinscrapy.seen.dupefilter import BitmapDupeFilter


def main() -> None:
    for mode in ("bitmap", "scalable"):
        directory = Path(tempfile.mkdtemp(prefix="bench-seen-"))
        kwargs = {"mode": mode, "bits": 1 << 27, "capacity": 4_000_000, "error_rate": 0.01}
        df = BitmapDupeFilter(path=directory, clock=Clock(), **kwargs)
        df.open()
        for i in range(5000):
            df.seen_fingerprint(i.to_bytes(16, "little"))
        df.close("finished")
        again = BitmapDupeFilter(path=directory, clock=Clock(), **kwargs)
        tracemalloc.start()
        again.open()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        size = (directory / "snapshot").stat().st_size
        print(f"{mode}: snapshot {size:,} bytes, peak traced during open {peak:,} bytes")
        again.close("finished")


if __name__ == "__main__":
    main()
