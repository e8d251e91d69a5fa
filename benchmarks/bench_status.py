"""What the status page costs a crawl: CPU per page and peak RSS with it off, on, and on with a
browser's polling (``/api/status`` + ``/api/history`` + ``/metrics`` every second).

    python -m benchmarks.bench_status [--reps 3] [--hosts 20] [--pages 100]

Each crawl is the ``cpu`` scenario of ``benchmarks/run.py`` (``DOWNLOAD_DELAY=0``, CPU-bound)
on the synthetic nginx web, measured from outside (rusage); the three variants alternate.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import threading
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.run import Scenario, crawl_once
from testweb.synthweb import SynthWeb, free_port

TOKEN = "bench-token"
VARIANTS = ("off", "on", "polled")


class Poller(threading.Thread):
    """A browser's load on the page: the three GETs the page and a Prometheus scrape make."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}"
        self.stop = threading.Event()
        self.calls = 0
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for path in ("/api/status", "/api/history?since=0", "/metrics"):
                request = urllib.request.Request(
                    self.base + path, headers={"Authorization": f"Bearer {TOKEN}"}
                )
                try:
                    with self.opener.open(request, timeout=5) as response:
                        response.read()
                    self.calls += 1
                except OSError:
                    pass  # not listening yet, or already closed


def run(reps: int, hosts: int, pages: int) -> dict[str, Any]:
    sc = Scenario("status", hosts, pages, 0.0, reps, per_domain=8, concurrent=100)
    rows: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-status-") as tmp:
        work = Path(tmp)
        with SynthWeb(hosts, pages, workdir=str(work / "web")) as web:
            for rep in range(reps):
                order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
                for variant in order:
                    port = free_port("127.0.0.1")
                    extra = (
                        ("LARBIN_STATUS_PORT=0",)
                        if variant == "off"
                        else (f"LARBIN_STATUS_PORT={port}", f"LARBIN_STATUS_TOKEN={TOKEN}")
                    )
                    poller = Poller(port) if variant == "polled" else None
                    if poller is not None:
                        poller.start()
                    result = crawl_once("larbin", sc, web, work, rep, 600, extra)
                    if poller is not None:
                        poller.stop.set()
                        poller.join()
                        result["poll_calls"] = poller.calls
                    rows[variant].append(result)
    return {
        "reps": reps,
        "hosts": hosts,
        "pages_per_host": pages,
        "variants": {v: _summary(r) for v, r in rows.items()},
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float:
        return statistics.median(r[key] for r in runs if r.get(key) is not None)

    return {
        "cpu_ms_per_page": median("cpu_ms_per_page"),
        "maxrss_mb": median("maxrss_mb"),
        "pages": median("pages_fetched"),
        "pages_per_s": median("pages_per_s"),
        "status": [r["status"] for r in runs],
        "poll_calls": [r.get("poll_calls") for r in runs if "poll_calls" in r],
    }


def markdown(report: dict[str, Any]) -> str:
    off = report["variants"]["off"]["cpu_ms_per_page"]
    lines = [
        f"Status page cost, {report['hosts']} hosts x {report['pages_per_host']} pages, "
        f"median of {report['reps']}:",
        "",
        "| status page | CPU ms/page | vs off | peak RSS MiB | pages/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in report["variants"].items():
        lines.append(
            f"| {name} | {row['cpu_ms_per_page']:.2f} | "
            f"{row['cpu_ms_per_page'] / off:.3f}x | {row['maxrss_mb']:.0f} | "
            f"{row['pages_per_s']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    report = run(args.reps, args.hosts, args.pages)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
