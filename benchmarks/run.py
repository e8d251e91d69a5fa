"""The benchmark runner: larbinscrapy and its peers, side by side, on one synthetic web.

    python -m benchmarks.run [--quick] [--reps N] [--json PATH] [--md PATH]
                             [--scenario all|cpu|large|polite|https] [--https] [--profile]
                             [--no-micro] [--crawlers plain,crawlee,wget,larbin]

Peers (``benchmarks/peers.py``): plain Scrapy, crawlee-python, wget and larbinscrapy. Scenarios
(see benchmarks/README.md for what each number means):

- ``cpu``: ``DOWNLOAD_DELAY=0``, 100 requests in flight; the crawlers are CPU-bound, so CPU ms
  per page and pages/s compare their per-page cost. Several repetitions, alternating order.
- ``large``: the same on a web 25x bigger (50 hosts x 1,000 pages), once per peer: whether a
  crawler's cost per page and its memory stay flat as the crawl grows.
- ``https`` (``--https``, or ``--scenario https``): the ``cpu`` web served twice by nginx, over
  TLS on port 443 of each host IP (a self-signed certificate made at start; each peer told to
  accept it) and over plain http; in each repetition every crawler crawls both, one right after
  the other, so the https / http ratio of each crawler is measured under the same load. From
  nginx's log: connections opened and TLS sessions resumed.
- ``polite``: a delay long enough that no crawler is CPU-bound; from nginx's log, per server IP:
  intervals between requests, the count shorter than the delay, and efficiency (plain Scrapy and
  larbinscrapy: the two with a per-host delay).

Each crawl is a subprocess measured from outside: wall time, CPU user+sys and peak RSS from
``os.wait4``'s rusage, what was fetched and when from nginx's access log, nginx's own CPU. A
crawler that fails is reported (exit code, stderr tail) and the others are still measured. Then
the micro-benchmarks (``benchmarks/bench_*.py``) run if present. ``--profile`` instead profiles
one crawl.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import platform
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import peers
from benchmarks.peers import CRAWLERS, LABELS, REPO
from benchmarks.report import fmt, render_markdown
from testweb.synthweb import SynthWeb

if TYPE_CHECKING:
    from testweb.synthweb import LogEntry

logger = logging.getLogger("benchmarks.run")

MICRO = ("bench_links", "bench_dupefilter", "bench_frontier_fifo", "bench_scheduler")
MICRO_QUICK_SIZES = {
    "--urls": "100000",
    "--records": "100000",
    "--pages": "100",
    "--requests": "20000",
    "--queued": "100000",
}
STALL_SECONDS = 60.0  # no new request in nginx's log for this long: the crawl is stuck
TAIL_LINES = 30
MSEC_TOLERANCE = 0.001  # nginx's $msec has millisecond resolution
POLITE_CRAWLERS = ("plain", "baseline", "larbin")  # the peers with a per-host delay to enforce
REFERENCE = "larbin"  # ratios are every other peer against this one


@dataclass
class Scenario:
    """One crawl configuration, run on its own synthetic web."""

    name: str
    hosts: int
    pages_per_host: int
    delay: float
    reps: int
    per_domain: int | None  # CONCURRENT_REQUESTS_PER_DOMAIN for the Scrapy peers; None: default
    concurrent: int | None  # requests in flight for larbin and crawlee; None: their default
    startup: bool = True  # also measure each crawler closed after its first page
    tls: bool = False  # served over https on port 443 (and crawled over http too, paired)


# --- running one crawl -----------------------------------------------------------------------
def crawler_command(
    crawler: str, sc: Scenario, web: SynthWeb, work: Path, items: Path, one_page: bool = False
) -> tuple[list[str], Path, dict[str, str]]:
    """The command line, working directory and environment of one crawl of ``sc``."""
    return peers.command(
        crawler,
        web=web,
        work=work,
        items=items,
        delay=sc.delay,
        per_domain=sc.per_domain,
        concurrent=sc.concurrent,
        one_page=one_page,
    )


def run_process(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    log_prefix: Path,
    timeout: float,
    web: SynthWeb | None = None,
    watch: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Run ``cmd`` to the end; its wall time, rusage, peak RSS and status.

    Peak RSS is the child's ``VmHWM`` (read while it runs), not ``ru_maxrss`` alone: that one
    keeps the high-water mark of the forked runner from before ``exec`` (~60 MB here), which
    would put a floor under every crawler's figure. A ``ru_maxrss`` above the runner's own
    high-water mark can only be the child's: it is taken, so a peak just before the exit,
    between two reads, is not missed. Stopped (SIGINT, then SIGKILL after 10 s) after
    ``timeout`` seconds, or when neither ``web``'s access log nor the child's output (stdout,
    stderr, the files in ``watch``) has grown for ``STALL_SECONDS``: a crawler trying its dead
    addresses is busy, not stuck.
    """
    stdout_path, stderr_path = Path(f"{log_prefix}.stdout"), Path(f"{log_prefix}.stderr")
    runner_hwm_kib = _vm_hwm_kib(os.getpid())
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        stopped, stop_at = "", 0.0
        log_size, log_moved = -1, start
        hwm_kib = 0
        while True:
            hwm_kib = max(hwm_kib, _vm_hwm_kib(proc.pid))
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.perf_counter()
            if web is not None:
                size = web.log_offset() + sum(_size(f) for f in (stdout_path, stderr_path, *watch))
                if size != log_size:
                    log_size, log_moved = size, now
            if not stopped and (now - start > timeout or now - log_moved > STALL_SECONDS):
                stopped = "timeout" if now - start > timeout else "stalled"
                stop_at = now
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGINT)
            elif stopped and now - stop_at > 10:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.02)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if rusage.ru_maxrss > max(runner_hwm_kib, _vm_hwm_kib(os.getpid())):
        hwm_kib = max(hwm_kib, rusage.ru_maxrss)  # the child's own peak, read exactly
    return {
        "exit_code": proc.returncode,
        "stopped": stopped,
        "wall_s": wall,
        "cpu_user_s": rusage.ru_utime,
        "cpu_sys_s": rusage.ru_stime,
        "cpu_s": rusage.ru_utime + rusage.ru_stime,
        "maxrss_mb": (hwm_kib or rusage.ru_maxrss) / 1024,  # KiB on Linux
        "stderr_tail": _tail(stderr_path, TAIL_LINES),
        "stderr_path": str(stderr_path),
    }


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _vm_hwm_kib(pid: int) -> int:
    """The peak resident set of ``pid`` since its ``exec``, KiB (0 when unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _tail(path: Path, n: int) -> list[str]:
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - 64 * 1024))
        return f.read().decode("utf-8", "replace").splitlines()[-n:]


def crawl_once(
    crawler: str,
    sc: Scenario,
    web: SynthWeb,
    work: Path,
    rep: int,
    timeout: float,
    one_page: bool = False,
    tag: str = "",
) -> dict[str, Any]:
    """One measured crawl: process figures plus what nginx saw during it."""
    name = f"{sc.name}{tag and '-' + tag}-{crawler}-{rep}"
    items = work / f"{name}.jsonl"
    cmd, cwd, env = crawler_command(crawler, sc, web, work, items, one_page)
    log_start, cpu_start = web.log_offset(), web.cpu_seconds()
    logger.info(
        "%s %s: %s",
        sc.name + (f" ({tag})" if tag else ""),
        f"rep {rep + 1}" if rep >= 0 else "start-up",
        LABELS[crawler],
    )
    result: dict[str, Any] = {"crawler": crawler, "scenario": sc.name, "rep": rep, "cmd": cmd}
    started = time.time()
    result |= run_process(cmd, cwd, env, work / name, timeout, web, (items,))
    time.sleep(0.2)  # nginx logs a request after its last byte is sent
    entries = web.access_log_entries(log_start)
    result["first_request_s"] = (min(e.msec for e in entries) - started) if entries else None
    result["nginx_cpu_s"] = web.cpu_seconds() - cpu_start
    result["items"] = _count_lines(items)
    result |= analyze_fetches(web, entries)
    if sc.delay:
        result["politeness"] = analyze_politeness(entries, sc.delay, len(web.ips))
    pages = result["pages_fetched"]
    result["pages_per_s"] = pages / result["wall_s"] if result["wall_s"] else 0.0
    # over the fetch span (first to last request nginx saw): the rate while crawling, without
    # start-up and the wait before exit
    span = result["active_s"]
    result["fetch_pages_per_s"] = pages / span if span else None
    result["tail_s"] = result["wall_s"] - span - result["first_request_s"] if span else None
    result["cpu_ms_per_page"] = 1000 * result["cpu_s"] / pages if pages else None
    result["status"] = _status(result)
    logger.info(
        "  %s: %d pages in %.1f s (fetch span %.1f s), %s ms CPU/page, coverage %.3f, RSS %.0f MB",
        result["status"],
        pages,
        result["wall_s"],
        span,
        fmt(result["cpu_ms_per_page"], 2),
        result["coverage"],
        result["maxrss_mb"],
    )
    return result


def _status(result: dict[str, Any]) -> str:
    if result["stopped"]:
        return result["stopped"]
    if result["exit_code"] not in peers.OK_EXIT_CODES.get(result["crawler"], (0,)):
        return "failed"
    return "ok" if result["pages_fetched"] else "no pages"


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


# --- what nginx saw --------------------------------------------------------------------------
def analyze_fetches(web: SynthWeb, entries: list[LogEntry]) -> dict[str, Any]:
    """Pages fetched, coverage and duplicates of one crawl, from its access-log entries.

    robots.txt and /sitemap.xml (larbinscrapy's LARBIN_SITEMAPS; the synthetic web has none)
    are per-site requests, counted apart: never pages, never duplicates.
    """
    fetched: Counter[str] = Counter()
    robots = sitemaps = other = non_200 = 0
    for e in entries:
        url = web.entry_url(e)
        if e.uri == "/robots.txt":
            robots += 1
        elif e.uri == "/sitemap.xml":
            sitemaps += 1
        elif url in web.pages and e.status == 200:
            fetched[url] += 1
        else:
            other += 1
        if e.status != 200:
            non_200 += 1
    times = [e.msec for e in entries]
    return {
        "requests": len(entries),
        "pages_fetched": sum(fetched.values()),
        "unique_pages": len(fetched),
        "coverage": len(fetched) / len(web.pages),
        "duplicates": sum(fetched.values()) - len(fetched),
        "duplicate_urls": sum(1 for n in fetched.values() if n > 1),
        "robots_requests": robots,
        "connections": len({e.connection for e in entries}),
        "tls_resumed": len({e.connection for e in entries if e.reused}),
        "sitemap_requests": sitemaps,
        "other_requests": other,
        "non_200": non_200,
        "active_s": max(times) - min(times) if times else 0.0,
    }


def analyze_politeness(entries: list[LogEntry], delay: float, n_ips: int) -> dict[str, Any]:
    """Per server IP: intervals between consecutive requests (robots.txt included).

    ``violations`` counts intervals shorter than ``delay`` by more than 1 ms ($msec's
    resolution: a logged 499 ms may be 499.9 ms).
    ``efficiency`` = intervals completed per second over the crawl's active period (first to
    last request) divided by the ideal ``n_ips / delay``: 1.0 means every IP was kept busy at
    exactly the delay from the first request to the last.
    """
    by_ip: dict[str, list[float]] = defaultdict(list)
    for e in entries:
        by_ip[e.ip].append(e.msec)
    per_ip = {}
    intervals_total = violations = 0
    min_interval = None
    for ip, times in sorted(by_ip.items()):
        times.sort()
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(times)]  # $msec: whole ms
        bad = sum(1 for g in gaps if g < delay - MSEC_TOLERANCE - 1e-9)
        per_ip[ip] = {
            "requests": len(times),
            "violations": bad,
            "min_interval_s": min(gaps) if gaps else None,
        }
        intervals_total += len(gaps)
        violations += bad
        if gaps and (min_interval is None or min(gaps) < min_interval):
            min_interval = min(gaps)
    all_times = [e.msec for e in entries]
    span = max(all_times) - min(all_times) if len(all_times) > 1 else 0.0
    efficiency = (intervals_total / span) / (n_ips / delay) if span else None
    return {
        "delay_s": delay,
        "ips": n_ips,
        "ips_seen": len(by_ip),
        "span_s": span,
        "intervals": intervals_total,
        "violations": violations,
        "min_interval_s": min_interval,
        "efficiency": efficiency,
        "per_ip": per_ip,
    }


# --- a scenario: alternating repetitions -----------------------------------------------------
def run_scenario(
    sc: Scenario, crawlers: list[str], work: Path, timeout: float | None
) -> dict[str, Any]:
    """All repetitions of one scenario on one synthetic web, crawlers in rotating order."""
    sc_work = work / sc.name
    sc_work.mkdir(parents=True, exist_ok=True)
    if timeout is None:
        per_host = (sc.pages_per_host + 1) * sc.delay * 2
        timeout = 120 + max(sc.hosts * sc.pages_per_host / 10, per_host)
    absent = {c: why for c in crawlers if (why := peers.missing(c))}
    for crawler, why in absent.items():
        logger.warning("%s: %s is absent: %s", sc.name, LABELS[crawler], why)
    present = [c for c in crawlers if c not in absent]
    if sc.tls:
        return _run_tls_scenario(sc, present, absent, sc_work, timeout)
    runs: list[dict[str, Any]] = []
    with SynthWeb(sc.hosts, sc.pages_per_host, workdir=str(sc_work / "web")) as web:
        logger.info(
            "%s: %d hosts x %d pages = %d pages (%.1f KiB/page), %d dead addresses, nginx pid %d",
            sc.name,
            sc.hosts,
            sc.pages_per_host,
            len(web.pages),
            web.page_bytes / len(web.pages) / 1024,
            len(web.dead_hosts),
            web.pid,
        )
        startup: dict[str, dict[str, Any]] = {}
        if sc.startup and not sc.delay:
            # Start-up and shut-down cost (imports, reactor, first connections): a crawl of the
            # same web closed after its first page. Subtracted, it leaves the marginal CPU per
            # page, what a crawl of millions of pages pays.
            for crawler in present:
                startup[crawler] = crawl_once(crawler, sc, web, sc_work, -1, timeout, True)
        for rep in range(sc.reps):
            # rotate, so no crawler always runs first (a cold page cache) or last
            shift = rep % len(present) if present else 0
            order = present[shift:] + present[:shift]
            for crawler in order:
                run = crawl_once(crawler, sc, web, sc_work, rep, timeout)
                base = startup.get(crawler)
                if base is not None and run["pages_fetched"] > base["pages_fetched"]:
                    run["marginal_cpu_ms_per_page"] = (
                        1000
                        * (run["cpu_s"] - base["cpu_s"])
                        / (run["pages_fetched"] - base["pages_fetched"])
                    )
                runs.append(run)
        web_info = {
            "hosts": sc.hosts,
            "pages_per_host": sc.pages_per_host,
            "pages": len(web.pages),
            "bytes_per_page": web.page_bytes / len(web.pages),
            "dead_addresses": len(web.dead_hosts),
        }
    return {
        "config": vars(sc) | {"timeout_s": timeout},
        "web": web_info,
        "runs": runs,
        "startup": startup,
        "absent": absent,
        "summary": summarize(runs, present, sc.reps),
    }


def _run_tls_scenario(
    sc: Scenario, present: list[str], absent: dict[str, str], sc_work: Path, timeout: float
) -> dict[str, Any]:
    """The https scenario: the same web over TLS (port 443) and over http, each crawler crawling
    both in every repetition, back to back (which one first alternates)."""
    runs: list[dict[str, Any]] = []
    http_runs: list[dict[str, Any]] = []
    with (
        SynthWeb(
            sc.hosts, sc.pages_per_host, workdir=str(sc_work / "web-tls"), tls=True, port=443
        ) as tls_web,
        SynthWeb(sc.hosts, sc.pages_per_host, workdir=str(sc_work / "web-http")) as http_web,
    ):
        logger.info(
            "%s: %d hosts x %d pages over https (%s) and http (%s)",
            sc.name,
            sc.hosts,
            sc.pages_per_host,
            tls_web.seeds[0],
            http_web.seeds[0],
        )
        for rep in range(sc.reps):
            shift = rep % len(present) if present else 0
            for crawler in present[shift:] + present[:shift]:
                webs = [(tls_web, runs), (http_web, http_runs)]
                for web, out in webs if rep % 2 == 0 else webs[::-1]:
                    name = "https" if web.tls else "http"
                    out.append(crawl_once(crawler, sc, web, sc_work, rep, timeout, tag=name))
        web_info = {
            "hosts": sc.hosts,
            "pages_per_host": sc.pages_per_host,
            "pages": len(tls_web.pages),
            "bytes_per_page": tls_web.page_bytes / len(tls_web.pages),
            "dead_addresses": len(tls_web.dead_hosts),
        }
    over_http: dict[str, Any] = {}
    for crawler in present:
        pairs = [
            (a, b)
            for a in runs
            for b in http_runs
            if a["crawler"] == b["crawler"] == crawler
            and a["rep"] == b["rep"]
            and a["status"] == b["status"] == "ok"
        ]
        over_http[crawler] = {
            key: _median([a[key] / b[key] for a, b in pairs if a.get(key) and b.get(key)])
            for key in ("cpu_ms_per_page", "wall_s")
        }
    return {
        "config": vars(sc) | {"timeout_s": timeout},
        "web": web_info,
        "runs": runs,
        "http_runs": http_runs,
        "startup": {},
        "absent": absent,
        "summary": summarize(runs, present, sc.reps),
        "http_summary": summarize(http_runs, present, sc.reps),
        "https_over_http": over_http,
    }


SUMMARY_KEYS = (
    "wall_s",
    "pages_fetched",
    "unique_pages",
    "coverage",
    "duplicates",
    "pages_per_s",
    "fetch_pages_per_s",
    "active_s",
    "tail_s",
    "first_request_s",
    "cpu_s",
    "cpu_ms_per_page",
    "marginal_cpu_ms_per_page",
    "maxrss_mb",
    "nginx_cpu_s",
    "robots_requests",
    "items",
    "connections",
    "tls_resumed",
)
POLITE_KEYS = ("efficiency", "violations", "min_interval_s", "span_s")
# ratio name -> (run key, True when it is peer / larbin, False for larbin / peer); each is
# written so that > 1 means larbinscrapy does better
RATIOS = {
    "cpu_ms_per_page": ("cpu_ms_per_page", True),
    "marginal_cpu_ms_per_page": ("marginal_cpu_ms_per_page", True),
    "fetch_pages_per_s": ("fetch_pages_per_s", False),
    "wall_s": ("wall_s", True),
    "maxrss_mb": ("maxrss_mb", True),
}


def summarize(runs: list[dict[str, Any]], crawlers: list[str], reps: int) -> dict[str, Any]:
    """Medians over the ok runs of each crawler; per-repetition ratios against larbinscrapy."""
    summary: dict[str, Any] = {}
    for crawler in crawlers:
        ok = [r for r in runs if r["crawler"] == crawler and r["status"] == "ok"]
        med = {k: _median([r.get(k) for r in ok]) for k in SUMMARY_KEYS}
        med |= {
            k: _median([r["politeness"][k] for r in ok if "politeness" in r]) for k in POLITE_KEYS
        }
        nginx, cpu = med["nginx_cpu_s"], med["cpu_s"]
        med["nginx_cpu_share"] = nginx / cpu if nginx is not None and cpu else None
        summary[crawler] = {"ok_runs": len(ok), "runs": reps, "median": med}
    pairs: list[dict[str, Any]] = []
    for rep in range(reps):
        by = {r["crawler"]: r for r in runs if r["rep"] == rep and r["status"] == "ok"}
        ref = by.get(REFERENCE)
        if ref is None:
            continue
        for peer, run in by.items():
            if peer == REFERENCE:
                continue
            pair: dict[str, Any] = {"rep": rep, "peer": peer}
            for name, (key, peer_over_ref) in RATIOS.items():
                num, den = (run.get(key), ref.get(key))
                if not peer_over_ref:
                    num, den = den, num
                pair[name] = num / den if num and den else None
            pairs.append(pair)
    summary["pairs"] = pairs
    summary["ratios"] = {
        peer: {name: _median([p[name] for p in pairs if p["peer"] == peer]) for name in RATIOS}
        for peer in crawlers
        if peer != REFERENCE
    }
    return summary


def _median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# --- micro-benchmarks ------------------------------------------------------------------------
def run_micro(quick: bool, work: Path) -> list[dict[str, Any]]:
    """Run each ``benchmarks/bench_*.py`` present with ``--json``; collect their tables."""
    results = []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    for name in MICRO:
        script = REPO / "benchmarks" / f"{name}.py"
        if not script.exists():
            results.append({"name": name, "status": "absent"})
            continue
        cmd = [sys.executable, str(script), "--json", str(work / f"{name}.json")]
        if quick:
            cmd += _quick_sizes(script, env)
        logger.info("micro-benchmark: %s", " ".join(cmd[1:]))
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=120 if quick else 480,
                check=False,
            )
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, out, err = None, _text(exc.stdout), _text(exc.stderr) + "\n(timed out)"
        data = None
        with contextlib.suppress(OSError, ValueError):
            data = json.loads((work / f"{name}.json").read_text())
        results.append(
            {
                "name": name,
                "cmd": cmd,
                "exit_code": code,
                "status": "ok" if code == 0 else "failed",
                "seconds": time.perf_counter() - start,
                "stdout": out,
                "stderr_tail": err.splitlines()[-TAIL_LINES:],
                "json": data,
            }
        )
    return results


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def _quick_sizes(script: Path, env: dict[str, str]) -> list[str]:
    """Small sizes for ``--quick``, for the size options the script's ``--help`` lists."""
    try:
        help_text = subprocess.run(
            [sys.executable, str(script), "--help"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout
    except subprocess.TimeoutExpired:
        return []
    args = []
    for flag, value in MICRO_QUICK_SIZES.items():
        if re.search(rf"{re.escape(flag)}\b", help_text):
            args += [flag, value]
    return args


# --- profile ---------------------------------------------------------------------------------
def run_profile(
    sc: Scenario, target: str, profiler: str, work: Path, top: int = 25
) -> dict[str, Any]:
    """One crawl of ``target`` under py-spy (sampling) or cProfile; the top functions."""
    sc_work = work / "profile"
    sc_work.mkdir(parents=True, exist_ok=True)
    with SynthWeb(sc.hosts, sc.pages_per_host, workdir=str(sc_work / "web")) as web:
        cmd, cwd, env = crawler_command(target, sc, web, sc_work, sc_work / "items.jsonl")
        timeout = 120 + sc.hosts * sc.pages_per_host / 5
        result: dict[str, Any] = {"target": target}
        log_start = web.log_offset()
        if profiler in ("auto", "py-spy"):
            raw = sc_work / "pyspy.txt"
            pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
            # blocking: py-spy pauses the crawl for each sample; --nonblocking lost ~45% of
            # the samples' stacks here (read while they changed), which skewed the shares
            prof_cmd = [
                pyspy,
                "record",
                "--format",
                "raw",
                "--rate",
                "250",
                "-o",
                str(raw),
                "--",
                *cmd,
            ]
            proc = run_process(prof_cmd, cwd, env, sc_work / "pyspy", timeout, web)
            if raw.exists() and raw.stat().st_size:
                result |= {
                    "profiler": "py-spy",
                    "cmd": prof_cmd,
                    "process": proc,
                    "rows": _pyspy_rows(raw, top),
                }
            elif profiler == "py-spy":
                result |= {"profiler": "py-spy", "cmd": prof_cmd, "process": proc, "rows": []}
            else:
                logger.warning(
                    "py-spy failed (exit %s), falling back to cProfile", proc["exit_code"]
                )
                log_start = web.log_offset()
        if "profiler" not in result:
            out = sc_work / "cprofile.out"
            head = [sys.executable, "-m", "cProfile", "-o", str(out)]
            prof_cmd = head + cmd[1:]  # "plain_spider.py ..." or "-m scrapy crawl ..."
            proc = run_process(prof_cmd, cwd, env, sc_work / "cprofile", timeout, web)
            rows = _cprofile_rows(out, top) if out.exists() else []
            result |= {"profiler": "cProfile", "cmd": prof_cmd, "process": proc, "rows": rows}
        time.sleep(0.2)
        result["fetches"] = analyze_fetches(web, web.access_log_entries(log_start))
    return result


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?)(?::\d+)?\)$")


def _frame_name(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    return f"{m['func']} ({m['file']})" if m else frame.strip()


def _pyspy_rows(raw: Path, top: int) -> list[dict[str, Any]]:
    """Self and inclusive sample shares per function from py-spy's raw (collapsed) output."""
    self_n: Counter[str] = Counter()
    incl_n: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_name(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))] or frames
        total += n
        self_n[frames[-1]] += n
        for name in set(frames):
            incl_n[name] += n
    return [
        {
            "function": name,
            "self_pct": 100 * n / total,
            "self_samples": n,
            "incl_pct": 100 * incl_n[name] / total,
        }
        for name, n in self_n.most_common(top)
    ]


def _cprofile_rows(out: Path, top: int) -> list[dict[str, Any]]:
    """Top functions by self time (tottime) from a cProfile dump."""
    stats = pstats.Stats(str(out))
    total = stats.total_tt or 1.0
    entries = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    rows = []
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in entries:
        rows.append(
            {
                "function": f"{func} ({_short_path(file)}:{line})",
                "self_pct": 100 * tottime / total,
                "self_s": tottime,
                "calls": ncalls,
                "incl_pct": 100 * cumtime / total,
            }
        )
    return rows


def _short_path(file: str) -> str:
    for marker in ("site-packages/", "lib/python3"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file.replace(str(REPO) + "/", "")


# --- the machine -----------------------------------------------------------------------------
def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
        info["mem_gib"] = round(int(mem) / 1024 / 1024, 1)
    with contextlib.suppress(ImportError):
        import scrapy
        import twisted

        info["scrapy"], info["twisted"] = scrapy.__version__, twisted.__version__
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        nginx = subprocess.run(
            ["/usr/sbin/nginx", "-v"], capture_output=True, text=True, check=False
        )
        info["nginx"] = nginx.stderr.strip().split("/")[-1]
    return info


# --- main ------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small web, 1 repetition (~2 min)")
    p.add_argument(
        "--reps", type=int, help="repetitions per crawler (default 3; quick 1; the large web 1)"
    )
    p.add_argument("--json", type=Path, help="write the full results as JSON here")
    p.add_argument("--md", type=Path, help="write the markdown report here")
    p.add_argument(
        "--scenario",
        choices=("all", "cpu", "large", "polite", "https"),
        default="all",
        help="all: cpu, large (not with --quick) and polite",
    )
    p.add_argument(
        "--https",
        action="store_true",
        help="also the https scenario (the cpu web over TLS and http, paired)",
    )
    p.add_argument(
        "--crawlers", default=",".join(CRAWLERS), help=f"comma list of {','.join(CRAWLERS)}"
    )
    p.add_argument("--hosts", type=int, help="CPU scenario hosts (default 20; quick 10)")
    p.add_argument("--pages", type=int, help="CPU scenario pages per host (default 100; quick 40)")
    p.add_argument("--large-hosts", type=int, default=50, help="large scenario hosts")
    p.add_argument("--large-pages", type=int, default=1000, help="large scenario pages per host")
    p.add_argument(
        "--per-domain",
        type=int,
        default=8,
        help="CONCURRENT_REQUESTS_PER_DOMAIN for the Scrapy peers (CPU scenarios)",
    )
    p.add_argument("--polite-hosts", type=int, help="polite scenario hosts (default 10; quick 5)")
    p.add_argument("--polite-pages", type=int, help="polite pages per host (default 15; quick 8)")
    p.add_argument("--delay", type=float, default=0.5, help="polite scenario DOWNLOAD_DELAY")
    p.add_argument("--timeout", type=float, help="seconds before a crawl is stopped")
    p.add_argument(
        "--baseline",
        type=Path,
        help="also run larbinscrapy from this checkout (before/after in one run)",
    )
    p.add_argument("--no-micro", action="store_true", help="skip the micro-benchmarks")
    p.add_argument(
        "--profile",
        action="store_true",
        help="only profile one crawl (CPU scenario web), print the top 25 functions",
    )
    p.add_argument("--profile-target", choices=CRAWLERS, default="larbin")
    p.add_argument("--profiler", choices=("auto", "py-spy", "cprofile"), default="auto")
    p.add_argument("--keep", action="store_true", help="keep the work dir (webs, crawl logs)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    crawlers = [c for c in args.crawlers.split(",") if c]
    if not crawlers or set(crawlers) - set(CRAWLERS):
        raise SystemExit(f"--crawlers: choose from {', '.join(CRAWLERS)}")
    if args.baseline:
        os.environ[peers.BASELINE_ENV] = str(args.baseline.resolve())
        if "baseline" not in crawlers:
            crawlers.insert(crawlers.index("larbin") if "larbin" in crawlers else 0, "baseline")
    elif "baseline" in crawlers and not os.environ.get(peers.BASELINE_ENV):
        crawlers.remove("baseline")
    for crawler in crawlers:
        peers.compile_bytecode(crawler)
    q = args.quick
    reps = args.reps or (1 if q else 3)
    cpu = Scenario(
        "cpu",
        args.hosts or (10 if q else 20),
        args.pages or (40 if q else 100),
        0.0,
        reps,
        args.per_domain,
        100,
    )
    # once per peer unless --reps says otherwise, no start-up run: at 50,000 pages start-up is
    # ~2% of the whole
    large = Scenario(
        "large",
        args.large_hosts,
        args.large_pages,
        0.0,
        args.reps or 1,
        args.per_domain,
        100,
        startup=False,
    )
    https = Scenario(
        "https",
        cpu.hosts,
        cpu.pages_per_host,
        0.0,
        reps,
        args.per_domain,
        100,
        startup=False,
        tls=True,
    )
    polite = Scenario(
        "polite",
        args.polite_hosts or (5 if q else 10),
        args.polite_pages or (8 if q else 15),
        args.delay,
        reps,
        None,
        None,
    )
    work = Path(tempfile.mkdtemp(prefix="larbin-bench-"))
    started = time.perf_counter()
    report: dict[str, Any] = {
        "command": "python -m benchmarks.run " + " ".join(argv or sys.argv[1:]),
        "machine": machine_info(),
        "scenarios": {},
    }
    try:
        if args.profile:
            report["profile"] = run_profile(cpu, args.profile_target, args.profiler, work)
        else:
            if args.scenario == "https" or args.https:
                report["scenarios"]["https"] = run_scenario(https, crawlers, work, args.timeout)
            if args.scenario in ("all", "cpu"):
                report["scenarios"]["cpu"] = run_scenario(cpu, crawlers, work, args.timeout)
            if args.scenario == "large" or (args.scenario == "all" and not q):
                report["scenarios"]["large"] = run_scenario(large, crawlers, work, args.timeout)
            polite_crawlers = [c for c in crawlers if c in POLITE_CRAWLERS]
            if args.scenario in ("all", "polite") and polite_crawlers:
                report["scenarios"]["polite"] = run_scenario(
                    polite, polite_crawlers, work, args.timeout
                )
            if not args.no_micro:
                report["micro"] = run_micro(q, work)
    finally:
        report["seconds"] = time.perf_counter() - started
        report["workdir"] = str(work) if args.keep else None
        markdown = render_markdown(report)
        print(markdown)
        if args.md:
            args.md.write_text(markdown)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1, default=str) + "\n")
        if args.keep:
            logger.info("work dir kept: %s", work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
