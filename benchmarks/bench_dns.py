"""DNS lookups per second and CPU per lookup: c-ares (``DnsCache``, the crawl's resolver) and
``twisted.names`` (the other maintained asynchronous client), against the simulated internet's
DNS server in a subprocess (``testweb/internet``), every name asked once.

``python -m benchmarks.bench_dns --names 5000 --dns-ms 100``: one JSON line per resolver
(wall seconds, lookups/s, CPU µs per lookup in this process, answered and failed names, and
the C heap (glibc's, ``mallinfo2``) and resident memory the lookups left in use).
``--c-ares-cache keep`` leaves c-ares' own query cache alone (the crawl's resolver empties it
every 4,096 answers: ``politeness/resolver.py``), to measure what it costs.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _memory_mb() -> tuple[float, float]:
    """(glibc heap in use, VmRSS) in MB."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks")] + [
            (f, ctypes.c_size_t) for f in ("hblkhd", "usmblks", "fsmblks", "uordblks")
        ]

    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = MallInfo2
    status = Path("/proc/self/status").read_text().splitlines()
    rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    return libc.mallinfo2().uordblks / 2**20, rss / 1024


def run(resolve: Any, names: list[str], reactor: Any) -> dict[str, Any]:
    """Ask every name at once; wait for all the answers on the reactor."""
    done = {"ok": 0, "failed": 0}
    heap, rss = _memory_mb()
    start, cpu = time.monotonic(), _cpu()
    for name in names:
        d = resolve(name)
        d.addCallbacks(
            lambda _: done.__setitem__("ok", done["ok"] + 1),
            lambda _: done.__setitem__("failed", done["failed"] + 1),
        )

    def check() -> None:
        if done["ok"] + done["failed"] == len(names):
            reactor.stop()
        else:
            reactor.callLater(0.01, check)

    reactor.callLater(0, check)
    reactor.run()
    wall, used = time.monotonic() - start, _cpu() - cpu
    heap_after, rss_after = _memory_mb()
    return {
        "c_heap_mb_left": round(heap_after - heap, 1),
        "rss_mb_grown": round(rss_after - rss, 1),
        "names": len(names),
        "wall_s": round(wall, 2),
        "lookups_per_s": round(len(names) / wall),
        "cpu_us_per_lookup": round(used / len(names) * 1e6),
        **done,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--names", type=int, default=5000)
    p.add_argument("--dns-ms", type=float, default=100.0)
    p.add_argument("--resolver", choices=("c-ares", "twisted.names"), default="c-ares")
    p.add_argument("--in-flight", type=int, default=500, help="LARBIN_DNS_IN_FLIGHT_MAX (c-ares)")
    p.add_argument(
        "--no-failures",
        action="store_true",
        help="every name answers (else the generator's mix: 1%% silent, CNAMEs...)",
    )
    p.add_argument(
        "--c-ares-cache",
        choices=("flush", "keep"),
        default="flush",
        help="keep: c-ares' query cache is never emptied (not the crawl's way)",
    )
    p.add_argument("--cache-max", type=int, default=100_000, help="LARBIN_DNS_CACHE_MAX")
    args = p.parse_args()
    from twisted.internet import reactor

    if args.c_ares_cache == "keep":
        from larbinscrapy.politeness import resolver as ares

        ares._FLUSH_EVERY = 2**62  # a benchmark's switch, not a setting

    from testweb.internet.harness import InternetProcess

    with InternetProcess(
        Path(tempfile.mkdtemp(prefix="bench-dns-")),
        [
            "--hosts",
            str(args.names),
            "--no-web",
            "--base",
            "127.24.0.0",
            "--dns",
            "127.24.0.1",
            "--dns-port",
            "0",
            "--dns-ms",
            str(args.dns_ms),
            *(["--no-failures"] if args.no_failures else []),
        ],
    ) as internet:
        address, port = internet.info["dns"]
        names = [internet.internet.host(i).name for i in range(args.names)]
        if args.resolver == "c-ares":
            from larbinscrapy.politeness.dns import DnsCache

            cache = DnsCache(
                reactor,
                servers=[f"{address}:{port}"],
                timeout=30,
                max_in_flight=args.in_flight,
                max_entries=args.cache_max,
            )
            resolve = cache.resolve
        else:
            from twisted.names import client

            resolver = client.createResolver(servers=[(address, port)])
            resolve = resolver.getHostByName
        result = run(resolve, names, reactor)
    print(
        json.dumps(
            {
                "resolver": args.resolver,
                "dns_ms": args.dns_ms,
                "in_flight": args.in_flight,
                "failures": not args.no_failures,
                "c_ares_cache": args.c_ares_cache,
                "cache_max": args.cache_max,
                **result,
            }
        )
    )


if __name__ == "__main__":
    main()
