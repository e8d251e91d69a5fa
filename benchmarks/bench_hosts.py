"""CPU a page, memory and descriptors as the number of hosts grows (#35, points 3 and 4).

    python -m benchmarks.bench_hosts [--hosts 1000 10000 100000] [--pages 5] [--hosts-per-ip 10]
                                     [-s NAME=VALUE ...] [--json PATH]
                                     [--census] [--tracemalloc] [--malloc] [--dns]

For each size: ``testweb.manyhosts`` serves the web (names pinned by ``LARBIN_RESOLVE``; with
``--dns`` looked up instead, root: the web answers them as a DNS server inside a network
namespace whose resolv.conf names it, and the crawl runs there, so 10^6 hosts need no pinned map
of 10^6 names in the crawl's memory; zero latency, ``--hosts-per-ip`` names an address, the
server keeps a connection 5 s), and ``scrapy crawl larbin`` crawls it from every host's start
page with the default settings but ``LARBIN_IP_DELAY=0`` (several names share an address) and
the status page off. Reported: the crawl's CPU (user + system, from ``wait4``) per page fetched,
pages/s, peak RSS (``ru_maxrss``), open descriptors (most seen, sampled from /proc every 0.5 s),
the cyclic GC's share of the CPU (``gc.callbacks`` timing every collection, installed by the
generated settings module), connections a host (from the server's log) and coverage. The
machine's load average is printed: on a shared machine compare CPU ms/page, not pages/s. In
``--json`` also: resident memory at each tenth of the run (a rise to the end is what the crawl
keeps of every host) and the ``malloc_trim`` calls' CPU.

Where the memory sits: ``--malloc`` reads, at the crawl's exit, pymalloc's arenas (and how full
their blocks are) and glibc's heap (in use, free) beside VmRSS; ``--tracemalloc`` traces every
allocation (the crawl runs several times slower) and keeps the largest snapshot, by line and by
file; ``--census`` counts the objects the cyclic collector walks, by type.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from testweb import manyhosts
from testweb.internet.netns import Namespace

ROOT = Path(__file__).resolve().parent.parent
FIRST_IP = "127.25.0.1"  # 127.25.0.0/16 - 127.28.0.0/16: up to 262,144 addresses
NAMESERVER = "127.24.255.53"  # with --dns (inside the namespace: its own loopback)

GC_TIMER = """
import atexit as _atexit, gc as _gc, json as _json, time as _time
_gc_spent = [0.0, 0.0, 0, [0.0, 0.0, 0.0], [0, 0, 0]]
def _gc_timer(phase, info):
    if phase == "start":
        _gc_spent[1] = _time.process_time()
    else:
        took = _time.process_time() - _gc_spent[1]
        _gc_spent[0] += took
        _gc_spent[2] += 1
        _gc_spent[3][info["generation"]] += took
        _gc_spent[4][info["generation"]] += 1
_gc.callbacks.append(_gc_timer)
_atexit.register(lambda: open({path!r}, "w").write(_json.dumps(
    {{"gc_seconds": _gc_spent[0], "collections": _gc_spent[2],
      "seconds_by_generation": _gc_spent[3], "collections_by_generation": _gc_spent[4]}})))
"""

# --census: on SIGUSR1 (sent every 10 s; Scrapy keeps SIGUSR2 for its stack dump), the
# GC-tracked objects and their references by type; the count with the most references is kept
CENSUS = """
import collections as _collections, signal as _signal
_most = [0]
def _census(signum, frame):
    counts, refs = _collections.Counter(), _collections.Counter()
    for o in _gc.get_objects():
        name = type(o).__qualname__
        counts[name] += 1
        refs[name] += len(_gc.get_referents(o))
    if sum(refs.values()) < _most[0]:
        return
    _most[0] = sum(refs.values())
    open({path!r}, "w").write(_json.dumps(
        {{"tracked": sum(counts.values()), "references": sum(refs.values()),
          "types": dict(counts.most_common(30)), "by_references": dict(refs.most_common(30))}}))
_signal.signal(_signal.SIGUSR1, _census)
"""

# --tracemalloc: allocations traced from the settings' import on; on SIGUSR1 a snapshot, the one
# with the most bytes kept, written as the top lines (two frames: the allocation and its caller)
TRACEMALLOC = """
import signal as _signal, tracemalloc as _tracemalloc
_tracemalloc.start(2)
_largest = [0]
def _snapshot(signum, frame):
    snap = _tracemalloc.take_snapshot()
    stats = snap.statistics("traceback")
    total = sum(s.size for s in stats)
    if total < _largest[0]:
        return
    _largest[0] = total
    def _where(f):
        return "/".join(f.filename.split("/")[-2:]) + ":" + str(f.lineno)
    top = [{{"bytes": s.size, "blocks": s.count, "where": [_where(f) for f in s.traceback]}}
           for s in stats[:60]]
    files = {{}}
    for s in snap.statistics("filename"):
        name = "/".join(s.traceback[0].filename.split("/")[-2:])
        files[name] = files.get(name, 0) + s.size
    by_file = sorted(files.items(), key=lambda kv: -kv[1])[:60]
    result = {{"traced_bytes": total, "top": top, "by_file": by_file}}
    open({path!r}, "w").write(_json.dumps(result))
_signal.signal(_signal.SIGUSR1, _snapshot)
"""

# --malloc: at exit, where the resident memory sits: Python's small-object allocator (pymalloc's
# arenas, and how much of them live blocks fill) against glibc's heap (mallinfo2), beside VmRSS
MALLOC = """
import ctypes as _ctypes, os as _os, sys as _sys, tempfile as _tempfile
class _Mallinfo2(_ctypes.Structure):
    _fields_ = [(n, _ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
def _malloc_report():
    with _tempfile.TemporaryFile("w+") as f:
        saved = _os.dup(2)
        _os.dup2(f.fileno(), 2)
        try:
            _sys._debugmallocstats()
        finally:
            _os.dup2(saved, 2)
            _os.close(saved)
        f.seek(0)
        text = f.read()
    pymalloc = {{}}
    for line in text.splitlines():
        name, _, value = line.lstrip("# ").partition("=")
        name = name.strip()
        if name in ("arenas allocated current", "bytes in allocated blocks",
                    "bytes in available empty blocks", "bytes in available blocks",
                    "bytes lost to pool headers", "bytes lost to quantization"):
            pymalloc.setdefault(name, int(value.replace(",", "").strip()))
    libc = _ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    mi = libc.mallinfo2()
    rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS"))
    open({path!r}, "w").write(_json.dumps({{
        "vmrss_kb": rss, "pymalloc": pymalloc,
        "glibc": {{"heap": mi.arena, "mmapped": mi.hblkhd, "in_use": mi.uordblks,
                  "free": mi.fordblks}}}}))
_atexit.register(_malloc_report)
"""


def rss_mb(pid: int) -> float:
    """The process's resident memory now (VmRSS), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def count_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def run_size(
    hosts: int,
    pages: int,
    hosts_per_ip: int,
    extra: list[str],
    workdir: Path,
    timeout: float,
    first_ip: str = FIRST_IP,
    census: bool = False,
    traced: bool = False,
    malloc: bool = False,
    dns: bool = False,
) -> dict[str, Any]:
    """One crawl of a ``hosts``-host web: its figures."""
    with contextlib.ExitStack() as stack:
        ns = (
            stack.enter_context(Namespace(NAMESERVER, name=f"bench-hosts-{os.getpid()}"))
            if dns
            else None
        )
        return _run_served(
            hosts,
            pages,
            hosts_per_ip,
            extra,
            workdir,
            timeout,
            first_ip,
            census,
            traced,
            malloc,
            ns,
        )


def _run_served(
    hosts: int,
    pages: int,
    hosts_per_ip: int,
    extra: list[str],
    workdir: Path,
    timeout: float,
    first_ip: str,
    census: bool,
    traced: bool,
    malloc: bool,
    ns: Namespace | None,
) -> dict[str, Any]:
    with manyhosts.served(workdir, hosts, pages, first_ip, hosts_per_ip, ns) as (port, seeds, env):
        gc_path = workdir / "gc.json"
        with open(workdir / "crawl" / "scale_settings.py", "a", encoding="utf-8") as f:
            f.write(GC_TIMER.format(path=str(gc_path)))
            if census:
                f.write(CENSUS.format(path=str(workdir / "census.json")))
            if traced:
                f.write(TRACEMALLOC.format(path=str(workdir / "traced.json")))
            if malloc:
                f.write(MALLOC.format(path=str(workdir / "malloc.json")))
        settings: dict[str, object] = {"LARBIN_STATS_FILE": workdir / "stats.json"}
        settings.update(item.split("=", 1) for item in extra)
        cmd = manyhosts.crawl_command(seeds, settings)
        if ns is not None:
            cmd = ns.command(cmd)
        started = time.monotonic()
        with open(workdir / "crawl.log", "w") as log:
            crawl = subprocess.Popen(
                cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}
            )
        most_fds, census_at = 0, started + 10
        rss: list[tuple[float, float]] = []  # (seconds in, MB)
        while True:
            pid, status, usage = os.wait4(crawl.pid, os.WNOHANG)
            if pid:
                break
            most_fds = max(most_fds, count_fds(crawl.pid))
            rss.append((time.monotonic() - started, rss_mb(crawl.pid)))
            if (census or traced) and time.monotonic() > census_at:
                crawl.send_signal(signal.SIGUSR1)
                census_at += 10
            if time.monotonic() - started > timeout:
                crawl.kill()
            time.sleep(0.5)
        crawl.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
    summary = manyhosts.summary(manyhosts.read_log(workdir / "web" / manyhosts.LOG), port)
    fetched = len(summary["pages"])
    cpu = usage.ru_utime + usage.ru_stime
    spent = json.loads(gc_path.read_text()) if gc_path.exists() else {}
    counted = workdir / "census.json"
    objects = json.loads(counted.read_text()) if census and counted.exists() else None
    stats_path = workdir / "stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    malloc_path = workdir / "malloc.json"
    allocators = json.loads(malloc_path.read_text()) if malloc_path.exists() else None
    traced_path = workdir / "traced.json"
    allocations = json.loads(traced_path.read_text()) if traced_path.exists() else None
    return {
        "hosts": hosts,
        "pages_per_host": pages,
        "names": "looked up (DNS)" if ns is not None else "pinned (LARBIN_RESOLVE)",
        "exit": crawl.returncode,
        "pages": fetched,
        "coverage": fetched / (hosts * pages),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_page": round(1000 * cpu / max(1, fetched), 3),
        "pages_per_s": round(fetched / wall, 1),
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "rss_kb_per_host": round(usage.ru_maxrss / hosts, 2),
        "open_fds_max": most_fds,
        # resident memory at each tenth of the run: a peak in the middle is what the crawl holds
        # while its hosts are in progress, a rise to the end what it keeps of every host
        "rss_mb_by_tenth": [
            round(next((mb for t, mb in reversed(rss) if t <= wall * k / 10 and mb), 0.0), 1)
            for k in range(1, 11)
        ],
        "gc_share": round(spent.get("gc_seconds", 0.0) / cpu, 3) if cpu else None,
        "gc_collections": spent.get("collections"),
        "gc_seconds_by_generation": [round(x, 2) for x in spent.get("seconds_by_generation", [])],
        "gc_collections_by_generation": spent.get("collections_by_generation"),
        "connections_per_host": round(summary["connections_per_host"], 2),
        "malloc_trims": stats.get("larbin/memory/trims", 0),
        "malloc_trim_cpu_s": round(stats.get("larbin/memory/trim_cpu_us", 0) / 1e6, 3),
        "fetched_twice": summary["twice"],
        "load_before": os.getloadavg()[0],
        **({"census": objects} if census else {}),
        **({"tracemalloc": allocations} if traced else {}),
        **({"malloc": allocators} if malloc else {}),
    }


def state_only(hosts: int, hosts_per_ip: int, crawl_delay_share: float) -> dict[str, Any]:
    """The politeness tables alone, in this process: ``hosts`` hosts fetched once each (a
    ``crawl_delay_share`` of them with a robots.txt Crawl-delay, kept packed), memory and
    tracked objects they leave (``--state``)."""
    import gc
    import resource

    from larbinscrapy.politeness.ipsites import IpTable

    class Settings(dict):
        def getfloat(self, key: str) -> float:
            return float(self[key])

        def getint(self, key: str) -> int:
            return int(self[key])

    from larbinscrapy.conf.defaults import SETTINGS

    table = IpTable.from_settings(Settings({k: v.default for k, v in SETTINGS.items()}))
    gc.collect()
    before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    before_objects = len(gc.get_objects())
    started = time.process_time()
    every = round(1 / crawl_delay_share) if crawl_delay_share else 0
    for n in range(hosts):
        host = manyhosts.host_name(n)
        st = table.get(manyhosts.ip_of(n, FIRST_IP, hosts_per_ip))
        hs = table.hosts.get(host)
        if every and n % every == 0:
            table.hosts.set_crawl_delay(hs, 2.0)
        table.acquire(st)
        table.hosts.start(hs)
        table.hosts.finish(hs, release=True)
        table.finish(st, release=True, failed=False)
    cpu = time.process_time() - started
    del st, hs
    gc.collect()
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss
    return {
        "hosts": hosts,
        "us_per_host": round(1e6 * cpu / hosts, 2),
        "bytes_per_host": round(1024 * grown_kb / hosts, 1),
        "tracked_objects_left": len(gc.get_objects()) - before_objects,
        "hosts_resident": len(table.hosts.hosts),
        "hosts_packed": len(table.hosts.packed),
        "ips_resident": len(table.ips),
        "ips_packed": len(table.packed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_hosts",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--pages", type=int, default=5, help="pages a host")
    parser.add_argument("--hosts-per-ip", type=int, default=10)
    parser.add_argument(
        "-s", dest="settings", action="append", default=[], help="NAME=VALUE for the crawl"
    )
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--first-ip", default=FIRST_IP, help="the web's first loopback address")
    parser.add_argument("--json", help="append each size's figures as a JSON line")
    parser.add_argument(
        "--census",
        action="store_true",
        help="the crawl's GC-tracked objects by type, every 10 s (the most references kept)",
    )
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="the crawl's allocations by place, every 10 s (the largest snapshot kept; slow)",
    )
    parser.add_argument(
        "--malloc",
        action="store_true",
        help="at the crawl's exit: pymalloc's arenas and glibc's heap beside its resident memory",
    )
    parser.add_argument(
        "--dns", action="store_true", help="names looked up in DNS, not pinned (root: a namespace)"
    )
    parser.add_argument(
        "--state",
        type=int,
        default=0,
        help="only the politeness tables, in process, with this many hosts",
    )
    parser.add_argument(
        "--crawl-delay-share",
        type=float,
        default=0.1,
        help="with --state: hosts with a Crawl-delay (kept packed)",
    )
    args = parser.parse_args(argv)
    if args.state:
        print(json.dumps(state_only(args.state, args.hosts_per_ip, args.crawl_delay_share)))
        return 0
    print(
        "hosts | pages | CPU ms/page | pages/s | peak RSS MB | KB/host | fds | GC share | "
        "conns/host | coverage | load"
    )
    for hosts in args.hosts:
        load = os.getloadavg()[0]
        with TemporaryDirectory(prefix="bench-hosts-") as tmp:
            row = run_size(
                hosts,
                args.pages,
                args.hosts_per_ip,
                args.settings,
                Path(tmp),
                args.timeout,
                args.first_ip,
                args.census,
                args.tracemalloc,
                args.malloc,
                args.dns,
            )
        row["load_before"] = load
        print(
            f"{hosts:,} | {row['pages']:,} | {row['cpu_ms_per_page']} | {row['pages_per_s']} | "
            f"{row['peak_rss_mb']} | {row['rss_kb_per_host']} | {row['open_fds_max']} | "
            f"{row['gc_share']} | {row['connections_per_host']} | {row['coverage']:.4f} | "
            f"{load:.1f}",
            flush=True,
        )
        if args.json:
            with open(args.json, "a", encoding="utf-8") as f:
                f.write(json.dumps({**row, "settings": args.settings}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
