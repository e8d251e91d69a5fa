"""The frontier codec on a request as the link gate makes it (depths, the gate's mark, the
referer in the meta and the Referer header, the spider's errback): this tree's against another
tree's, paired; each decodes its own record.

    git archive <commit> | tar -x -C /tmp/old
    python -m benchmarks.bench_codec /tmp/old/larbinscrapy/frontier/codec.py

Both codecs run in one process, alternated 200 times (5,000 calls each), so machine load falls
on both alike; the minimum is the cost without load, the median the cost under it.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import timeit
from typing import Any

from scrapy import Spider

from larbinscrapy.frontier import codec
from larbinscrapy.lean.request import SafeUrlRequest

URL = "http://h01.test:8080/section/a/page-0042.html"


def _load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("codec_other", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Spider(Spider):
    """Owns the errback the gate gives every request."""

    name = "bench"

    def on_error(self, failure: Any) -> None:
        pass


def main(other_path: str, rounds: int = 200, calls: int = 5000) -> None:
    other = _load(other_path)
    spider = _Spider()
    referer = "http://h01.test:8080/section/a/"
    request = SafeUrlRequest(
        URL,
        errback=spider.on_error,
        headers={"Referer": referer},
        meta={
            "depth": 3,
            "larbin_site_depth": 2,
            "larbin_admitted": URL,
            "larbin_referer": referer,
        },
    )
    records = {"other": other.encode(request, spider), "this": codec.encode(request, spider)}
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, module in (("other", other), ("this", codec)):
            record = records[name]
            for op, call in (
                ("encode", lambda m=module: m.encode(request, spider)),
                ("decode", lambda m=module, r=record: m.decode(r, spider)),
            ):
                seconds = timeit.timeit(call, number=calls)
                times.setdefault(f"{name} {op}", []).append(seconds / calls * 1e6)
    for name, record in records.items():
        print(f"{name} record: {len(record)} bytes: {record.decode()}")
    for key, values in sorted(times.items()):
        print(f"{key}: min {min(values):.2f} us, median {statistics.median(values):.2f} us")


if __name__ == "__main__":
    main(sys.argv[1])
