"""Memory an idle keep-alive connection of the lean handler keeps, over http and https.

``python -m benchmarks.bench_idle_connections [--connections 300] [--base TREE]``: serves one
nginx site (``testweb.synthweb``, plain and TLS) on loopback, fetches the same ~21 KB page over
N connections at once through the lean handler, lets them go idle in its pool and prints one
JSON line a scheme: bytes a connection in Python objects (tracemalloc) and in glibc's heap (in
use, ``mallinfo2``: Python's objects over 512 bytes and OpenSSL's state). ``--base TREE`` runs
the same from another checkout first (a subprocess with that tree on its path). A broad crawl
keeps thousands of connections idle between a site's fetches, so this is what each one costs
for as long as the server keeps it alive. Figures go to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class _Mallinfo2(ctypes.Structure):
    _fields_ = [  # the fields up to the one read
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
        )
    ]


def _c_heap_in_use() -> int:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    return int(libc.mallinfo2().uordblks)


def measure(connections: int, tls: bool) -> dict[str, Any]:
    """One scheme: what ``connections`` idle connections keep, each."""
    from scrapy import Request

    from tests.support.http1 import make_handler, plain_reactor, run
    from testweb.synthweb import SynthWeb

    async def fetch(handler: Any, requests: list[Request]) -> list[Any]:
        return list(await asyncio.gather(*(handler.download_request(r) for r in requests)))

    with (
        plain_reactor(),
        SynthWeb(hosts=1, pages_per_host=5, dead=0, tls=tls, workdir=tempfile.mkdtemp()) as web,
    ):
        handler, _ = make_handler("lean", CONCURRENT_REQUESTS_PER_DOMAIN=connections)
        url = sorted(u for u in web.pages if u.startswith(web.seeds[0]))[1]
        run(handler.download_request(Request(url)))  # TLS: the shared context, once
        gc.collect()
        tracemalloc.start()
        heap, traced = _c_heap_in_use(), tracemalloc.get_traced_memory()[0]
        answers = run(fetch(handler, [Request(url) for _ in range(connections)]), timeout=120)
        body = len(answers[0].body)
        del answers
        gc.collect()
        heap, traced = _c_heap_in_use() - heap, tracemalloc.get_traced_memory()[0] - traced
        tracemalloc.stop()
        idle = sum(len(conns) for conns in handler._pool.idle.values())
        run(handler.close())
    return {
        "tree": str(REPO),
        "scheme": "https" if tls else "http",
        "idle_connections": idle,
        "body_bytes": body,
        "python_bytes_a_connection": round(traced / idle),
        "c_heap_bytes_a_connection": round(heap / idle),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_idle_connections")
    p.add_argument("--connections", type=int, default=300)
    p.add_argument("--base", type=Path, default=None, help="another checkout, run first")
    args = p.parse_args(argv)
    if args.base is not None:
        env = {**os.environ, "PYTHONPATH": str(args.base)}
        cmd = [sys.executable, "-m", "benchmarks.bench_idle_connections"]
        base = [*cmd, "--connections", str(args.connections)]
        subprocess.run(base, env=env, cwd=args.base, check=True)
    for tls in (False, True):
        print(json.dumps(measure(args.connections, tls)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
