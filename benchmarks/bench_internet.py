"""Our crawl of the simulated internet (``testweb/internet``) at N hosts, with real DNS.

``python -m benchmarks.bench_internet --hosts 1000 [--latency] [--seed 1]`` (root: it makes a
network namespace): serves ``python -m testweb.internet`` inside a fresh
namespace whose resolv.conf points at the simulated DNS server (port 53), runs ``scrapy crawl
larbin`` of its seeds there with the ordinary system resolver (no ``LARBIN_RESOLVE``) and the
test CA trusted, and prints one JSON document: CPU ms a page, pages/s, peak RSS, most open fds,
the UDP datagrams the namespace's kernel dropped (``udp_datagrams_dropped``: DNS queries at the
server, answers at the crawler), and the analyzer's report (coverage against the generator's
truth, DNS queries per host, politeness at the server; with latency, the requests in flight at
the server). ``--latency``
adds a 30 ms median DNS answer delay and 100 ms median time to first byte. A crawl is stopped
when the server has logged nothing for ``--stall`` seconds (reported as ``stopped: stalled``)
or after ``--timeout``. With ``-s JOBDIR=DIR`` the same command again resumes the crawl on the
same web (the seed makes it), its items appended. Figures go to ``benchmarks/RESULTS.md``.

The peers on the same web (``--peers plain,crawlee``): plain Scrapy with its documented "Broad
Crawls" settings (``benchmarks/plain_spider.py``: Scrapy's own resolver, getaddrinfo in its
thread pool, certificates not checked as Scrapy's default; redirects off as that page says) and
crawlee-python (``benchmarks/crawlee_spider.py``, its own venv: ``make bench-crawlee-venv``;
``--insecure``), each run like ours: a fresh web in its own namespace, the same seeds, the same
figures from the server's log (coverage, pages fetched twice, robots-disallowed pages, the
shortest gap between two requests to one host and to one IP). ``--peers-only`` skips ours.

Where the CPU goes: ``--base TREE`` runs each crawl from that checkout too, before this tree's
(alternated: the same web, one after the other); ``--syscalls`` counts the crawl's system calls
with ``perf stat`` (``epoll_wait`` = reactor iterations); ``--py-spy DIR`` records a profile per
crawl (``py-spy record --format raw``; its own CPU is then in ``cpu_s``; with either, peak RSS
and open fds are the wrapper's: read them from a plain run); ``--native DIR`` samples the
crawl with ``perf record`` (C code, the kernel, the interpreter's own loop: what py-spy charges
to the Python frame that called it) and puts its CPU by library in ``native_by_library``;
``--inside gc,malloc,census`` runs ``bench_hosts``' probes inside the crawl (a
``sitecustomize`` ahead on its path): the cyclic GC's CPU, where the resident memory sits at
exit, the GC-tracked objects by type (every 30 s, the largest count kept); ``--netns-prefix``
names the namespaces.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks import bench_hosts, peers
from larbinscrapy.conf import defaults
from testweb.internet.analyze import analyze, load
from testweb.internet.dns import dns_address
from testweb.internet.harness import InternetProcess, crawl_command, run_watched
from testweb.internet.netns import Namespace

if TYPE_CHECKING:
    from testweb.internet.logs import WebEntry
    from testweb.internet.model import Internet

REPO = Path(__file__).resolve().parent.parent
BASE = "127.100.0.0"


def udp_receive_drops(snmp: str) -> int | None:
    """UDP datagrams the kernel dropped for a full receive buffer (``RcvbufErrors`` of
    ``/proc/net/snmp``): DNS queries at the server and answers at the crawler that were lost."""
    rows = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(rows) < 2 or "RcvbufErrors" not in rows[0]:
        return None
    return int(rows[1][rows[0].index("RcvbufErrors")])


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (the simulated internet's server)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_flight(internet: Internet, web: list[WebEntry], until: float) -> dict[str, float]:
    """Requests waiting for their first byte at the server, from its log and each host's time
    to first byte (the generator's): the mean over the crawl up to ``until``, the most at once,
    and the most at once on one IP and on one host (politeness: ``LARBIN_IP_CONNECTIONS``, one
    a host)."""
    events: list[tuple[float, int, str, str]] = []
    for e in web:
        if e.t > until:
            break
        host = internet.host_of(e.host)
        if host is not None and host.ttfb > 0:
            events += [(e.t, 1, e.ip, e.host), (e.t + host.ttfb, -1, e.ip, e.host)]
    events.sort(key=lambda ev: (ev[0], ev[1]))  # an end before a start at the same instant
    level = most = 0
    area, last = 0.0, web[0].t if web else 0.0
    per: dict[str, int] = {}
    most_ip = most_host = 0
    for t, step, ip, name in events:
        area += level * (min(t, until) - last)
        last = min(t, until)
        level += step
        most = max(most, level)
        at_ip = per[ip] = per.get(ip, 0) + step
        at_host = per["host:" + name] = per.get("host:" + name, 0) + step
        most_ip, most_host = max(most_ip, at_ip), max(most_host, at_host)
    return {
        "in_flight_mean": round(area / max(1e-9, until - (web[0].t if web else 0.0)), 1),
        "in_flight_max": most,
        "in_flight_per_ip_max": most_ip,
        "in_flight_per_host_max": most_host,
    }


def _wrapped(cmd: list[str], tree: Path, work: Path, probe: dict[str, Any]) -> list[str]:
    """The crawl's command run from ``tree``, under perf stat and py-spy when asked."""
    venv_python = tree / ".venv" / "bin" / "python"
    if venv_python.exists():
        cmd = [str(venv_python), *cmd[1:]]
    if probe.get("py_spy"):
        out = Path(probe["py_spy"]) / f"{work.name}.spy"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        record = [spy, "record", "--nonblocking", "--rate", "100", "--format", "raw"]
        cmd = [*record, "-o", str(out), "--", *cmd]
    if probe.get("native"):
        out = Path(probe["native"]) / f"{work.name}.perf"
        cmd = ["perf", "record", "--quiet", "-F", "499", "-o", str(out), "--", *cmd]
    if probe.get("syscalls"):
        events = "syscalls:sys_enter_epoll_wait,raw_syscalls:sys_enter"
        cmd = ["perf", "stat", "-x", ",", "-o", str(work / "perf.txt"), "-e", events, "--", *cmd]
    return cmd


def _peer_command(peer: str, seeds: Path, work: Path) -> list[str]:
    """A peer's crawl of ``seeds`` (the module doc): its own defaults, the system resolver."""
    items = str(work / "items.jsonl")
    if peer == "plain":
        return [sys.executable, str(peers.PLAIN_SPIDER), "--seeds-file", str(seeds), "--out", items]
    if peer == "crawlee":
        crawlee = [str(peers.CRAWLEE_PYTHON), str(peers.CRAWLEE_SPIDER), "--seeds-file", str(seeds)]
        return [*crawlee, "--out", items, "--concurrency", "100", "--insecure"]
    raise SystemExit(f"--peers: unknown peer {peer!r} (plain, crawlee)")


SERVER_CLOCK_SLACK = 0.01  # the server logs a request when its event loop reads it: late by ms


def _delays(extra: list[str]) -> tuple[float, float]:
    """(``DOWNLOAD_DELAY``, ``LARBIN_IP_DELAY``) our crawl runs with: the harness's 0 per host
    unless ``-s`` sets it, the IP's at most the host's (``IpTable.from_settings``)."""
    given = dict(kv.split("=", 1) for kv in extra if "=" in kv)
    host = float(given.get("DOWNLOAD_DELAY", 0.0))
    ip = float(given.get("LARBIN_IP_DELAY", defaults.LARBIN_IP_DELAY))
    return host, min(ip, host)


def _perf_counts(path: Path) -> dict[str, int]:
    """``perf stat -x ,`` output: event -> count."""
    counts: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[0].isdigit():  # count,unit,event
                counts[fields[2].split(":")[-1]] = int(fields[0])
    return counts


def _by_library(path: Path) -> dict[str, float]:
    """A ``perf record`` file's samples by shared library (the kernel's included): percent."""
    report = subprocess.run(
        ["perf", "report", "--stdio", "--sort", "dso", "-i", str(path)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    shares: dict[str, float] = {}
    for line in report.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].endswith("%") and not line.startswith("#"):
            shares[fields[1]] = float(fields[0].rstrip("%"))
    return shares


def bench(
    hosts: int,
    seed: int,
    latency: bool,
    work: Path,
    timeout: float,
    stall: float,
    extra: list[str],
    probe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One crawl of a fresh simulated internet; the figures and the analyzer's report."""
    probe = probe or {}
    tree = Path(probe.get("tree") or REPO)
    logdir = work / "internet"
    args = [
        "--hosts",
        str(hosts),
        "--seed",
        str(seed),
        "--base",
        BASE,
        "--write-seeds",
        str(logdir / "seeds.txt"),
    ]
    if latency:
        args += ["--dns-ms", "30", "--ttfb-ms", "100"]
    if probe.get("max_pages"):
        args += ["--max-pages", str(probe["max_pages"])]
    logdir.mkdir(parents=True, exist_ok=True)
    name = f"{probe.get('netns_prefix', 'internet-')}{os.getpid()}-{work.name}"
    with (
        Namespace(dns_address(BASE), name=name) as ns,
        InternetProcess(logdir, args, netns=ns) as net,
    ):
        path = [str(_probes(work, probe.get("inside", ""))), str(tree)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "SSL_CERT_FILE": net.ca}
        env.pop("SCRAPY_SETTINGS_MODULE", None)
        peer = probe.get("peer", "larbin")
        if peer == "larbin":
            crawl = _wrapped(crawl_command(logdir / "seeds.txt", work, extra), tree, work, probe)
        else:
            crawl = _peer_command(peer, logdir / "seeds.txt", work)
        cmd = ns.command(crawl)
        result = run_watched(cmd, env, work, logdir / "web.log", timeout, stall, cwd=tree)
        result["server_cpu_s"] = _cpu_s(net.proc.pid)
        snmp = ns.run(["cat", "/proc/net/snmp"], capture_output=True, text=True).stdout
        result["udp_datagrams_dropped"] = udp_receive_drops(snmp)  # the namespace's own
    internet, seeds, web, dns = load(logdir)
    host_delay, ip_delay = _delays(extra) if peer == "larbin" else (0.0, 0.0)
    report = analyze(internet, seeds, web, dns, host_delay, ip_delay, SERVER_CLOCK_SLACK)
    page_times = sorted(
        e.t for e in web if e.status == 200 and e.path not in ("/robots.txt", "/sitemap.xml")
    )
    pages = len(page_times)
    # the crawl's tail (a few hosts with hundreds of pages, one connection each) is long: the
    # time to 95% of the pages says how fast the bulk went
    t95 = (page_times[int(pages * 0.95) - 1] - web[0].t) if pages >= 20 else None
    # one host's pages come one at a time (a connection a host): with latency, the largest
    # host alone sets the end; half the pages says how fast the crawl goes while the work is
    # spread over many hosts (what latency hiding is about)
    t50 = (page_times[int(pages * 0.5) - 1] - web[0].t) if pages >= 20 else None
    perf = _perf_counts(work / "perf.txt")
    result.update(
        {
            "crawler": peers.LABELS.get(probe.get("peer", "larbin"), "larbinscrapy"),
            "tree": str(tree),
            "load": [round(x, 2) for x in os.getloadavg()],
            "hosts": hosts,
            "seed": seed,
            "latency": latency,
            "requests": len(web),
            "pages": pages,
            "cpu_ms_per_page": round(result["cpu_s"] * 1000 / max(1, pages), 3),
            "user_cpu_ms_per_page": round(result["cpu_user_s"] * 1000 / max(1, pages), 3),
            "pages_per_s": round(pages / result["wall_s"], 1),
            "to_95pct_pages_s": round(t95, 1) if t95 else None,
            "pages_per_s_to_95pct": round(0.95 * pages / t95, 1) if t95 else None,
            "to_50pct_pages_s": round(t50, 1) if t50 else None,
            "pages_per_s_to_50pct": round(0.5 * pages / t50, 1) if t50 else None,
            "dns_queries_per_host": round(len(dns) / hosts, 3),
            "server_cpu_ms_per_request": round(result["server_cpu_s"] * 1000 / max(1, len(web)), 3),
            "requests_per_page": round(len(web) / max(1, pages), 2),
            "reactor_iterations_per_page": (
                round(perf["sys_enter_epoll_wait"] / max(1, pages), 1)
                if "sys_enter_epoll_wait" in perf
                else None
            ),
            "syscalls_per_page": (
                round(perf["sys_enter"] / max(1, pages), 1) if "sys_enter" in perf else None
            ),
            "report": report,
        }
    )
    if latency and t95:
        result.update(in_flight(internet, web, web[0].t + t95))
    stats = work / "stats.json"
    if stats.exists():
        got = json.loads(stats.read_text())
        kept = (
            "larbin/dns",
            "larbin/dropped",
            "larbin/fetch/in_flight_cap",
            "larbin/http1/connections",
            "larbin/tls/",
        )
        result["stats"] = {k: v for k, v in got.items() if k.startswith(kept)}
    if probe.get("native"):
        native = Path(probe["native"]) / f"{work.name}.perf"
        if native.exists():
            result["native_by_library"] = _by_library(native)
    for probe_name in filter(None, (probe.get("inside") or "").split(",")):
        out = work / f"{probe_name}.json"
        if out.exists():
            result[probe_name] = json.loads(out.read_text())
    return result


def _probes(work: Path, inside: str) -> Path:
    """A directory with a ``sitecustomize`` running ``bench_hosts``' probes named in ``inside``
    (empty: an empty directory)."""
    where = work / "probes"
    where.mkdir(exist_ok=True)
    names = set(filter(None, inside.split(",")))
    if unknown := names - {"gc", "malloc", "census", "series"}:
        raise SystemExit(f"--inside: unknown probe(s): {', '.join(sorted(unknown))}")
    if names:
        code = [bench_hosts.GC_TIMER.format(path=str(work / "gc.json"))]
        if "malloc" in names:
            code.append(bench_hosts.MALLOC.format(path=str(work / "malloc.json")))
        if "census" in names:  # the signal from a timer thread: the census runs in the main one
            code.append(bench_hosts.CENSUS.format(path=str(work / "census.json")))
            code.append(CENSUS_TICKS)
        if "series" in names:
            code.append(SERIES.format(path=str(work / "series.jsonl")))
        (where / "sitecustomize.py").write_text("\n".join(code))
    return where


# --inside series: every 60 s, in the crawl's own thread, the GC-tracked objects by type (count,
# their own bytes, and the bytes of the untracked str/bytes/int they hold) and the RSS, appended
# as one JSON line: what grows with the hosts met, where a census of the peak cannot tell
SERIES = """
import gc as _sgc, json as _sjson, sys as _ssys, threading as _sthreading, time as _stime
def _series_once():
    import collections
    count, own, held = collections.Counter(), collections.Counter(), collections.Counter()
    leaf = (str, bytes, int, float, bytearray)
    for o in _sgc.get_objects():
        name = type(o).__qualname__
        count[name] += 1
        own[name] += _ssys.getsizeof(o)
        for r in _sgc.get_referents(o):
            if type(r) in leaf:
                held[name] += _ssys.getsizeof(r)
    rss = int(open("/proc/self/statm").read().split()[1]) * 4096
    top = sorted(count, key=lambda n: -(own[n] + held[n]))[:40]
    with open({path!r}, "a") as f:
        f.write(_sjson.dumps({{"t": _stime.monotonic(), "rss": rss, "tracked": sum(count.values()),
            "bytes": sum(own.values()) + sum(held.values()),
            "types": {{n: [count[n], own[n], held[n]] for n in top}}}}) + "\\n")
def _series_tick():
    from twisted.internet import reactor
    reactor.callLater(60, _series_tick)
    _series_once()
def _series_start():  # never imports the reactor itself: the crawl chooses which to install
    reactor = _ssys.modules.get("twisted.internet.reactor")
    if reactor is not None and reactor.running:
        reactor.callFromThread(reactor.callLater, 60, _series_tick)
        return
    _sthreading.Timer(1, _series_start).start()
if "crawl" in _ssys.argv:
    _sthreading.Timer(5, _series_start).start()
"""


CENSUS_TICKS = """
import os as _os, threading as _threading
def _ticks():
    while True:
        _time.sleep(30)
        _os.kill(_os.getpid(), _signal.SIGUSR1)
if "crawl" in __import__("sys").argv:  # (under -m, argv at start-up lacks "scrapy")
    _threading.Thread(target=_ticks, daemon=True).start()
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_internet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--hosts", type=int, action="append", help="repeatable (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latency", action="store_true", help="30 ms DNS, 100 ms to first byte")
    p.add_argument("--both", action="store_true", help="without, then with latency")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--stall", type=float, default=60, help="stop after this long without a request")
    p.add_argument("--work", type=Path, default=None)
    p.add_argument(
        "-s", dest="settings", action="append", default=[], help="KEY=VALUE for the crawl"
    )
    p.add_argument("--base", type=Path, default=None, help="another checkout, run first")
    p.add_argument("--reps", type=int, default=1, help="repetitions (with --base: pairs)")
    p.add_argument("--syscalls", action="store_true", help="count system calls (perf stat)")
    p.add_argument("--py-spy", type=Path, default=None, help="a py-spy profile per crawl here")
    p.add_argument("--native", type=Path, default=None, help="a perf record per crawl here")
    p.add_argument("--inside", default="", help="probes in the crawl: gc, malloc, census, series")
    p.add_argument("--netns-prefix", default="internet-")
    p.add_argument("--max-pages", type=int, default=None, help="pages a host at most (1: one)")
    p.add_argument("--peers", default="", help="comma-separated: plain, crawlee (run after ours)")
    p.add_argument("--peers-only", action="store_true", help="the peers without our crawl")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-internet-"))
    for where in (args.py_spy, args.native):
        if where:
            where.mkdir(parents=True, exist_ok=True)
    trees = [("base", args.base), ("this", REPO)] if args.base else [("this", REPO)]
    runs: list[tuple[str, Path | None, str]] = [
        (label, tree, "larbin") for label, tree in trees if not args.peers_only
    ]
    for peer in filter(None, args.peers.split(",")):
        why = peers.missing(peer)
        if why:
            raise SystemExit(f"--peers: {peer} cannot run here: {why}")
        runs.append((peer, REPO, peer))
    results = []
    for rep, hosts in ((r, h) for r in range(args.reps) for h in args.hosts or [1000]):
        for latency in (False, True) if args.both else (args.latency,):
            for label, tree, peer in runs:
                run_dir = work / f"h{hosts}-{'lat' if latency else 'nolat'}-{label}-{rep}"
                run_dir.mkdir(parents=True, exist_ok=True)
                probe = {
                    "tree": tree,
                    "syscalls": args.syscalls,
                    "py_spy": args.py_spy,
                    "native": args.native,
                    "netns_prefix": args.netns_prefix,
                    "max_pages": args.max_pages,
                    "peer": peer,
                    "inside": args.inside if peer == "larbin" else "",
                }
                result = bench(
                    hosts,
                    args.seed,
                    latency,
                    run_dir,
                    args.timeout,
                    args.stall,
                    args.settings,
                    probe,
                )
                results.append(result)
                print(json.dumps(result), flush=True)
    (work / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
