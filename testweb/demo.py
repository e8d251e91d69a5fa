"""``make demo``: crawl the bundled test web on loopback and watch it on the status page.

    python -m testweb.demo           # until Ctrl-C: the test web and a continuous crawl of it
    python -m testweb.demo --once    # crawl it once, compare with its ground truth, exit

No internet needed: 11 virtual hosts on 10 loopback IPs, with robots.txt, redirects,
duplicates, frames, a 500 page and a slow host. The default mode crawls with the real
politeness (``DOWNLOAD_DELAY`` 1 s per host, so the first pass takes about a minute), then keeps
revisiting pages (``LARBIN_REVISIT`` with short intervals), and prints the status page's address
with its token; Ctrl-C stops the crawl cleanly. ``--once`` is the quick check the tests run.
Items go to ``output/demo/items.jsonl``, the crawl's stats to ``output/demo/stats.json``, its
state to ``output/demo/job/`` and the test web's request log to ``output/demo/web/`` (both fresh
on every run: the self-check reads this run's requests only).

``-s NAME=VALUE`` (repeatable) passes a setting to the crawl, after the demo's own: the status
page's address and port are ``LARBIN_STATUS_HOST``/``LARBIN_STATUS_PORT`` like any crawl's
(``make demo DEMO_ARGS="-s LARBIN_STATUS_PORT=9000"``); ``--port`` chooses the test web's port.
The crawl may reach the test web's own IPs only (``LARBIN_ALLOWED_NETWORKS``, from the web).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from testweb.harness import RunningWeb, pages, start_web

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "output" / "demo"  # --out
PAGE_WAIT = 60.0  # seconds to wait for the crawl's status page to come up

# A continuous crawl with intervals a newcomer can watch (the defaults are days).
WATCH_SETTINGS = {
    "LARBIN_REVISIT": "true",
    "LARBIN_REVISIT_INTERVAL": "60",
    "LARBIN_REVISIT_INTERVAL_MIN": "30",
    "LARBIN_REVISIT_BUCKET": "5",
    "LOGSTATS_INTERVAL": "10",
}
# Quick: no delay per host. The last seconds are still politeness: h03.test asks for
# Crawl-delay: 1 and slow.test answers after --slow-delay; the log line says so every second.
ONCE_SETTINGS = {"DOWNLOAD_DELAY": "0.05", "LOGSTATS_INTERVAL": "1"}


def crawl_command(web: RunningWeb, out: Path, settings: dict[str, str]) -> list[str]:
    networks = ",".join(f"{ip}/32" for ip in sorted(set(web.resolve.values())))
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        "urls=" + ",".join(web.seeds),
        "-s",
        "LARBIN_RESOLVE=" + json.dumps(web.resolve),
        "-s",
        f"LARBIN_ALLOWED_NETWORKS={networks}",  # the SSRF guard refuses loopback
        "-s",
        f"JOBDIR={out / 'job'}",
        "-s",
        f"LARBIN_STATS_FILE={out / 'stats.json'}",
        "-O",
        str(out / "items.jsonl"),
    ]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd


def wait_for_status_page(proc: subprocess.Popen[bytes], jobdir: Path) -> tuple[str, str] | None:
    """(address, token) once the crawl wrote them to its JOBDIR; None if it ended first."""
    deadline = time.monotonic() + PAGE_WAIT
    while time.monotonic() < deadline and proc.poll() is None:
        address, token = jobdir / "http-address", jobdir / "http-token"
        if address.exists() and token.exists():
            text = address.read_text().strip()
            if text:
                return text, token.read_text().strip()
        time.sleep(0.1)
    return None


def wait_through_ctrl_c(proc: subprocess.Popen[bytes]) -> int:
    """Wait for the crawl; Ctrl-C reaches it too (same terminal) and it closes cleanly."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            print(
                "\nstopping: the crawl finishes what is in flight (Ctrl-C again forces it)",
                flush=True,
            )


def watch(web: RunningWeb, out: Path, settings: dict[str, str]) -> int:
    proc = subprocess.Popen(crawl_command(web, out, {**WATCH_SETTINGS, **settings}), cwd=ROOT)
    try:
        page = wait_for_status_page(proc, out / "job")
    except KeyboardInterrupt:  # stopped before the page came up
        page = None
    if page is not None:
        address, token = page
        print(
            f"\n  Status page: {address}/#token={token}\n"
            f"  Open it in a browser to watch the crawl (pages/s, queues, IPs, filters).\n"
            f"  API token: {token}  (curl -H 'Authorization: Bearer {token}' "
            f"{address}/api/status)\n"
            f"  The crawl revisits pages until Ctrl-C.\n",
            flush=True,
        )
    return wait_through_ctrl_c(proc)


def once(web: RunningWeb, out: Path, settings: dict[str, str]) -> int:
    print(
        "The last seconds are politeness: h03.test asks for Crawl-delay: 1, slow.test answers "
        "slowly (the log line every second shows what is still queued).",
        flush=True,
    )
    started = time.monotonic()
    code = subprocess.call(crawl_command(web, out, {**ONCE_SETTINGS, **settings}), cwd=ROOT)
    print(f"\ncrawl exit code {code} in {time.monotonic() - started:.1f} s")
    return code


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testweb.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="crawl the test web once and exit (compared with its ground truth)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="where items, stats and state go")
    parser.add_argument("--port", type=int, default=0, help="the test web's port (0: any free one)")
    parser.add_argument(
        "-s",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_setting,
        help="a setting for the crawl (repeatable)",
    )
    args = parser.parse_args(argv)
    out: Path = args.out
    settings = dict(args.settings)
    for fresh in ("job", "web"):  # a fresh crawl, not a resume; a request log of this run only
        shutil.rmtree(out / fresh, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    with start_web(out / "web", slow_delay=0.5, port=args.port, own_session=True) as web:
        print(
            f"test web: {len(web.hosts)} hostnames on {len(set(web.hosts.values()))} loopback "
            f"IPs, port {web.port}, seeds {' '.join(web.seeds)}",
            flush=True,
        )
        code = once(web, out, settings) if args.once else watch(web, out, settings)
        fetched = pages(web.read_log(), web.port)  # robots.txt and /sitemap.xml set apart
        truth = web.web.ground_truth(web.seeds, depth=5)
    feed = out / "items.jsonl"
    items = feed.read_text().splitlines() if feed.exists() else []
    print(
        f"{len(fetched)} distinct URLs fetched, {len(items)} items in {feed} (content "
        f"duplicates dropped{'' if args.once else ', revisits included'})"
    )
    print(
        f"ground truth {len(truth)} URLs: missing {len(truth - fetched)}, "
        f"unexpected {len(fetched - truth)}"
    )
    return code or int(args.once and fetched != truth)


if __name__ == "__main__":
    sys.exit(main())
