"""Distributed mode: a local crawl, one worker and two on one CPU-bound web; Redis memory per URL.

    python benchmarks/bench_distributed.py [--hosts 10] [--pages 40] [--large] [--reps 1]
                                           [--cluster] [--urls 100000] [--json PATH]
                                           [--memory-only] [--memory-repo TREE]
    python benchmarks/bench_distributed.py --split [--hosts 20] [--pages 150] [--links 30]
                                           [--cluster] [--reps 2] [--base OLD_CHECKOUT]
    python benchmarks/bench_distributed.py --capacity [--capacity-hosts 2000] [--capacity-pages 4]
                                           [--no-cluster] [--json PATH]

* Crawl: the CPU scenario of ``benchmarks.run`` (``SynthWeb``, ``DOWNLOAD_DELAY=0``,
  ``CONCURRENT_REQUESTS=100``, ``CONCURRENT_REQUESTS_PER_DOMAIN=8``), each repetition in this
  order on the same web: a local crawl (``settings.base``), one worker with
  ``settings.distributed`` against a fresh ``redis-server``, then two workers at once. Ratios
  are taken within one repetition (the machine may be shared: absolute rates drift between
  runs, the three crawls of one repetition share the same minute). pages/s is taken over the
  active period in nginx's log (first to last request), so start-up and the
  ``LARBIN_REDIS_IDLE_BEFORE_CLOSE`` wait do not count; CPU ms/page is user + sys of every process
  over the pages fetched (Redis's own CPU apart). ``--large`` is a web whose two-worker crawl
  lasts more than 30 s; ``--cluster`` runs the workers on a 3-master Redis Cluster.
* Memory of requests as a crawl makes them (``memory_crawled``): one worker crawls a fan-out web
  (``--fanout-hosts`` roots on their own loopback addresses, each linking to ``--fanout-links``
  pages of its host, which answer only once measured), so every link is admitted by the gate
  with its referer, depths, mark and errback and waits in the frontier; then ``MEMORY USAGE``
  of the frontier's keys per queued URL, of the seen bits per seen URL, the ``used_memory``
  delta, and what each field of a stored record costs.
* Memory: ``INFO memory`` ``used_memory`` deltas for ``--urls`` URLs of the synthetic web's
  shape: our frontier entries (``RedisFrontier.admit``: site, host, codec record), our Bloom
  filter sized for that many URLs at 0.1% (``MEMORY USAGE`` of the string), and, in the same
  Redis, plain scrapy-redis: ``RFPDupeFilter`` (a SET of 40-char SHA1 hex) and its default
  ``PriorityQueue`` (a sorted set of pickled request dicts).
* ``--split`` (a worker's fixed cost): a local crawl and one worker (and, with ``--base``, one
  worker of another checkout, for before/after in one run), alternated per repetition; each
  process's CPU is sampled every ``SAMPLE_S`` s and cut at its first and last page in nginx's
  log: CPU before the first page and after the last (fixed), per page in between; Redis's CPU
  (``psutil`` of its processes) per page and outside the pages.
* ``--capacity`` (issue 33, point 3): one worker crawls ``testweb.manyhosts`` (many hosts, a few
  pages each) on one Redis, then on a 3-master cluster: per node, Redis's CPU, network bytes,
  commands and scripts per page (``INFO`` deltas); every key grouped by kind with its
  ``MEMORY USAGE`` per host and per page, after the crawl and while URLs wait on every host.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis
from scrapy import Request, Spider

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.run import Scenario, analyze_fetches, crawler_command, run_process  # noqa: E402
from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter  # noqa: E402
from larbinscrapy.distributed.frontier import NORMAL, RedisFrontier  # noqa: E402
from larbinscrapy.frontier import codec  # noqa: E402
from larbinscrapy.parse.urls import fingerprint_url, host_of, site_of  # noqa: E402
from testweb.synthweb import SynthWeb  # noqa: E402

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisProcess:
    """A throwaway redis-server on a free loopback port, no persistence."""

    def __init__(self, workdir: Path) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc = subprocess.Popen(
            [
                REDIS_SERVER,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        self.client = redis.Redis.from_url(self.url)
        self._cpu0 = 0.0
        for _ in range(500):
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def cpu_seconds(self) -> float:
        """redis-server's CPU since ``reset_cpu`` (``INFO cpu``)."""
        info = self.client.info("cpu")
        return float(info["used_cpu_sys"] + info["used_cpu_user"]) - self._cpu0

    def reset_cpu(self) -> None:
        self._cpu0 = 0.0
        self._cpu0 = self.cpu_seconds()

    def pids(self) -> list[int]:
        return [self.proc.pid]

    def used_memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class ClusterRedis:
    """``--cluster``: a 3-master Redis Cluster (``tests/support/cluster.py``) behind the same
    interface as ``RedisProcess``; the workers get ``LARBIN_REDIS_CLUSTER=True``."""

    settings = ("LARBIN_REDIS_CLUSTER=True",)

    def __init__(self, workdir: Path) -> None:
        from tests.support.cluster import RedisClusterProcess, cluster_port

        self.cluster = RedisClusterProcess(workdir / "cluster", [cluster_port() for _ in range(3)])
        self.cluster.create()
        self.url = self.cluster.url
        self.nodes = [redis.Redis(port=p) for p in self.cluster.ports]
        self.client = self  # flushall() below
        self._cpu0 = 0.0

    def pids(self) -> list[int]:
        return [p.pid for p in self.cluster.procs]

    def flushall(self) -> None:
        for node in self.nodes:
            node.flushall()

    def cpu_seconds(self) -> float:
        infos = [node.info("cpu") for node in self.nodes]
        return sum(float(i["used_cpu_sys"] + i["used_cpu_user"]) for i in infos) - self._cpu0

    def reset_cpu(self) -> None:
        self._cpu0 = 0.0
        self._cpu0 = self.cpu_seconds()

    def stop(self) -> None:
        self.cluster.stop()


# --- crawls ----------------------------------------------------------------------------------
def crawl(
    workers: int, sc: Scenario, web: SynthWeb, rds: Any, work: Path, tag: str
) -> dict[str, Any]:
    """``workers`` Redis workers at once on ``web`` (``rds`` None: one local crawl)."""
    if rds is not None:
        rds.client.flushall()
    log_start = web.log_offset()
    nginx0 = web.cpu_seconds()
    results: list[dict[str, Any]] = [{} for _ in range(workers)]

    def one(i: int) -> None:
        cmd, cwd, env = crawler_command("larbin", sc, web, work, work / f"{tag}-{i}.jsonl")
        if rds is not None:
            env["SCRAPY_SETTINGS_MODULE"] = "settings.distributed"
            cmd += ["-s", f"REDIS_URL={rds.url}", "-s", "LARBIN_REDIS_IDLE_BEFORE_CLOSE=1"]
            for kv in getattr(rds, "settings", ()):
                cmd += ["-s", kv]
        results[i] = run_process(cmd, cwd, env, work / f"{tag}-{i}", 900, web)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.2)
    nginx_cpu = web.cpu_seconds() - nginx0
    fetches = analyze_fetches(web, web.access_log_entries(log_start))
    active = fetches["active_s"] or 1e-9
    pages = fetches["pages_fetched"]
    cpu = sum(r["cpu_s"] for r in results)
    return {
        "mode": "local" if rds is None else f"{workers} worker{'s' * (workers > 1)}",
        "workers": workers,
        "exit_codes": [r["exit_code"] for r in results],
        "wall_s": max(r["wall_s"] for r in results),
        "cpu_s": cpu,
        "cpu_user_s": sum(r["cpu_user_s"] for r in results),
        "cpu_sys_s": sum(r["cpu_sys_s"] for r in results),
        "redis_cpu_s": rds.cpu_seconds() if rds is not None else 0.0,
        "nginx_cpu_s": nginx_cpu,
        "pages": pages,
        "coverage": fetches["coverage"],
        "duplicates": fetches["duplicates"],
        "active_s": active,
        "pages_per_s": pages / active,
        "cpu_ms_per_page": 1000 * cpu / max(1, pages),
    }


def one_repetition(
    sc: Scenario, web: SynthWeb, rds: Any, work: Path, rep: int
) -> list[dict[str, Any]]:
    """A local crawl, one worker, two workers: the same web, one after the other."""
    out = []
    for workers, server in ((1, None), (1, rds), (2, rds)):
        if server is not None:
            server.reset_cpu()
        out.append(crawl(workers, sc, web, server, work, f"r{rep}-{workers}-{server is None}"))
        print(
            f"  rep {rep + 1}: {out[-1]['mode']}: {out[-1]['pages']} pages, "
            f"{out[-1]['cpu_ms_per_page']:.2f} ms CPU/page, {out[-1]['pages_per_s']:.0f} "
            "pages/s",
            file=sys.stderr,
            flush=True,
        )
    return out


# --- memory ----------------------------------------------------------------------------------
FANOUT_NET = "127.31.0."  # the fan-out web's addresses: h1.bench on .1, h2.bench on .2, ...


class FanoutWeb:
    """``hosts`` root pages, each linking to ``links`` pages of its host (the synthetic web's
    paths); those pages answer only after ``release()``, so the links stay queued."""

    def __init__(self, hosts: int, links: int) -> None:
        import http.server

        self.hosts, self.links = hosts, links
        self.released = threading.Event()
        web = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/":
                    body = "".join(
                        f'<a href="/s{i % 8}/page{i}.html">page {i}</a>\n'
                        for i in range(1, web.links + 1)
                    ).encode()
                    status = 200
                else:  # robots.txt, sitemap.xml: 404 (allowed, none); a page: not yet
                    if self.path.endswith(".html"):
                        web.released.wait(600)
                        return
                    body, status = b"", 404
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the worker stopped mid-answer: nothing to report

        with socket.socket() as sock:
            sock.bind((FANOUT_NET + "1", 0))
            self.port = sock.getsockname()[1]
        self.servers = []
        for k in range(1, hosts + 1):
            server = Server((FANOUT_NET + str(k), self.port), Handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers.append(server)
        self.resolve = {f"h{k}.bench": FANOUT_NET + str(k) for k in range(1, hosts + 1)}
        self.seeds = [f"http://h{k}.bench:{self.port}/" for k in range(1, hosts + 1)]

    def release(self) -> None:
        self.released.set()
        for server in self.servers:
            server.shutdown()
            server.server_close()


def _key_bytes(client: Any, pattern: str) -> int:
    return sum(int(client.memory_usage(k, samples=0) or 0) for k in client.scan_iter(pattern))


def field_costs(records: list[bytes]) -> dict[str, float]:
    """Average bytes a stored record spends on each field (JSON punctuation included)."""
    costs: dict[str, float] = {}
    for raw in records:
        rec = json.loads(raw)
        parts = {
            "url": rec[0],
            "priority": rec[1],
            "meta": rec[2] if len(rec) > 2 else None,
            "callback": rec[3] if len(rec) > 3 else None,
            "errback": rec[4] if len(rec) > 4 else None,
            "method, body, headers": rec[5:] or None,
        }
        if isinstance(parts["meta"], list):  # packed: depth, site depth, referer, flags, rest
            meta = parts.pop("meta") + [None] * 5
            parts.update(
                {"depths": meta[:2], "referer": meta[2], "flags": meta[3], "other meta": meta[4]}
            )
        for name, value in parts.items():
            if value is not None:
                costs[name] = (
                    costs.get(name, 0)
                    + len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
                    + 1
                )
    return {k: v / len(records) for k, v in costs.items()} | {
        "record": sum(len(r) for r in records) / len(records)
    }


def seen_capacity() -> int:
    """The URLs the distributed profile's Bloom filter is sized for."""
    import settings.distributed as profile
    from larbinscrapy.conf import defaults

    return int(getattr(profile, "LARBIN_DUPEFILTER_CAPACITY", defaults.LARBIN_DUPEFILTER_CAPACITY))


def memory_crawled(
    rds: RedisProcess, work: Path, hosts: int, links: int, repo: Path = REPO
) -> dict[str, Any]:
    """Redis memory per queued and per seen URL for requests a real crawl made (see above);
    ``repo``: the tree whose worker makes them (``--memory-repo``: another commit's)."""
    rds.client.flushall()
    web = FanoutWeb(hosts, links)
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        "urls=" + ",".join(web.seeds),
        "-s",
        f"REDIS_URL={rds.url}",
        "-s",
        f"LARBIN_RESOLVE={json.dumps(web.resolve)}",
        "-s",
        "DOWNLOAD_DELAY=0",
        "-s",
        "LOG_LEVEL=INFO",
        "-s",
        "LARBIN_STATUS_PORT=0",
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
    ]
    env = {**os.environ, "PYTHONPATH": str(repo), "SCRAPY_SETTINGS_MODULE": "settings.distributed"}
    log = open(work / "fanout.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    want = hosts * links
    try:
        deadline = time.monotonic() + 300
        last, stable = -1, 0
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            queued = int(rds.client.hget("larbin:frontier:count", "queued") or 0)
            stable = stable + 1 if queued == last and queued >= want - 2 * hosts else 0
            last = queued
            if stable >= 4:
                break
        frontier = _key_bytes(rds.client, "larbin:frontier*")
        seen = _key_bytes(rds.client, "larbin:seen*")
        records = [
            e.split(b"\t")[-1]
            for k in rds.client.scan_iter("larbin:frontier:tier:*")
            for e in rds.client.lrange(k, 0, 999)
        ]
        records += [
            e[1:]
            for k in rds.client.scan_iter("larbin:frontier:site:*")
            for e in rds.client.lrange(k, 0, 99)
        ]
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
        log.close()
        web.release()
    # what the frontier's keys hold in used_memory: freed when they go (the worker is gone)
    before_del = rds.used_memory()
    for key in list(rds.client.scan_iter("larbin:frontier*")):
        rds.client.delete(key)
    freed = before_del - rds.used_memory()
    capacity = int(rds.client.strlen("larbin:seen")) * 8
    return {
        "hosts": hosts,
        "links": links,
        "queued": last,
        "seen_urls": want + hosts,
        "frontier_bytes_per_queued": frontier / max(1, last),
        "freed_bytes_per_queued": freed / max(1, last),
        "seen_bits": capacity,
        "seen_bytes": seen,
        "seen_capacity": seen_capacity(),
        "fields": field_costs(records) if records else {},
    }


def synthetic_urls(n: int) -> list[str]:
    hosts = max(1, n // 1000)
    return [f"http://h{i % hosts:04d}.bench:8080/s{i % 8}/page{i}.html" for i in range(n)]


class BenchSpider(Spider):
    """Owns the callbacks the synthetic requests name."""

    name = "bench"

    def parse_sitemap(self, response: Any) -> None:  # named by one request in ten
        pass

    def on_error(self, failure: Any) -> None:  # the gate's errback
        pass


def linked_requests(urls: list[str], spider: BenchSpider) -> list[Request]:
    """Requests as the link gate makes them: the page that linked (meta and Referer header),
    depths, the gate's mark, the spider's errback; one in ten with a non-default callback."""
    out = []
    for i, url in enumerate(urls):
        referer = url.rsplit("/", 1)[0] + "/index.html"
        meta = {
            "depth": 3,
            "larbin_site_depth": 2,
            "larbin_referer": referer,
            "larbin_admitted": url,
        }
        callback = spider.parse_sitemap if i % 10 == 0 else None
        out.append(
            Request(
                url,
                callback=callback,
                errback=spider.on_error,
                meta=meta,
                headers={"Referer": referer},
            )
        )
    return out


def memory(rds: RedisProcess, n: int) -> dict[str, Any]:
    server = rds.client
    server.flushall()
    urls = synthetic_urls(n)
    spider = BenchSpider()
    requests = linked_requests(urls, spider)
    out: dict[str, Any] = {"urls": n}

    before = rds.used_memory()
    df = RedisBitmapDupeFilter(server, "bench:seen", mode="bloom", capacity=n, error_rate=0.001)
    frontier = RedisFrontier(server, "bench:frontier")
    for i in range(0, n, 1000):
        batch = [
            (
                NORMAL,
                df.positions(fingerprint_url(r.url)),
                frontier.entry(site_of(r.url), host_of(r.url), codec.encode(r, spider)),
            )
            for r in requests[i : i + 1000]
        ]
        frontier.admit("bench", df.key, 0, batch)
    total = rds.used_memory() - before
    seen = int(server.memory_usage("bench:seen"))
    out["larbin_seen_bytes_per_url"] = seen / n
    out["larbin_queued_bytes_per_url"] = (total - seen) / n
    out["larbin_record_bytes"] = sum(len(codec.encode(r, spider)) for r in requests[:1000]) / 1000

    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.queue import PriorityQueue

    before = rds.used_memory()
    rfp = RFPDupeFilter(server, "bench:rfp")
    pipe = server.pipeline(transaction=False)
    for r in requests:
        pipe.sadd(rfp.key, rfp.request_fingerprint(r))
    pipe.execute()
    out["scrapy_redis_seen_bytes_per_url"] = (rds.used_memory() - before) / n
    before = rds.used_memory()
    queue = PriorityQueue(server, spider, "bench:requests")
    for r in requests:
        queue.push(r)
    out["scrapy_redis_queued_bytes_per_url"] = (rds.used_memory() - before) / n
    server.flushall()
    return out


def ceiling(one: dict[str, Any], two: dict[str, Any]) -> float:
    """The most two workers / one can reach on this machine's cores, from the CPU each crawl
    spent a page: one worker runs on one core at most; two workers, Redis and nginx share all
    of them (a two-worker crawl cannot go faster than the cores can pay for its pages)."""
    cores = os.cpu_count() or 1
    ms = {
        k: 1000 * (c["cpu_s"] + c["redis_cpu_s"] + c["nginx_cpu_s"]) / max(1, c["pages"])
        for k, c in (("one", one), ("two", two))
    }
    alone = min(1000 / one["cpu_ms_per_page"], cores * 1000 / ms["one"])
    both = min(2 * 1000 / two["cpu_ms_per_page"], cores * 1000 / ms["two"])
    return both / alone


def crawled_lines(c: dict[str, Any]) -> list[str]:
    fields = ", ".join(f"{k} {v:.1f}" for k, v in c["fields"].items() if k != "record")
    return [
        "",
        f"### Redis memory of requests a crawl made ({c['hosts']} roots x {c['links']} "
        f"links, {c['queued']} queued, one worker, one Redis)",
        "",
        "| | bytes |",
        "|---|---:|",
        f"| per queued URL: `MEMORY USAGE` of the frontier's keys | "
        f"{c['frontier_bytes_per_queued']:.1f} |",
        f"| per queued URL: `used_memory` freed when they are deleted | "
        f"{c['freed_bytes_per_queued']:.1f} |",
        f"| a stored record, on average | {c['fields']['record']:.1f} |",
        f"| per URL the seen bits are sized for ({c['seen_bits']:,} bits, "
        f"{c['seen_capacity']:,} URLs) | {c['seen_bytes'] / c['seen_capacity']:.2f} |",
        "",
        f"A record's fields, bytes on average (JSON punctuation included): {fields}.",
    ]


def render_memory(report: dict[str, Any]) -> str:
    """The memory part of ``render`` alone (``--memory-only``)."""
    lines = render(report | {"reps": [], "web": {"pages": 0, "hosts": 0}, "redis": "one Redis"})
    return lines[lines.index("\n###") :] if "\n###" in lines else lines


def render(report: dict[str, Any]) -> str:
    m = report["memory"]
    lines = [
        f"## Distributed: {report['web']['pages']} pages ({report['web']['hosts']} hosts), "
        f"CPU-bound, {report['redis']}; {os.cpu_count()} CPUs",
        "",
        "| rep | mode | pages | coverage | dup | active s | wall s | CPU s (user+sys) "
        "| Redis CPU s | nginx CPU s | CPU ms/page | pages/s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios = []
    for rep, crawls in enumerate(report["reps"]):
        for c in crawls:
            lines.append(
                f"| {rep + 1} | {c['mode']} | {c['pages']} | {100 * c['coverage']:.1f}% "
                f"| {c['duplicates']} | {c['active_s']:.1f} | {c['wall_s']:.1f} "
                f"| {c['cpu_s']:.1f} ({c['cpu_user_s']:.1f}+{c['cpu_sys_s']:.1f}) "
                f"| {c['redis_cpu_s']:.1f} | {c['nginx_cpu_s']:.1f} | {c['cpu_ms_per_page']:.2f} "
                f"| {c['pages_per_s']:.1f} |"
            )
        local, one, two = crawls
        ratios.append(
            (
                one["cpu_ms_per_page"] / local["cpu_ms_per_page"],
                two["pages_per_s"] / one["pages_per_s"] if one["pages_per_s"] else 0,
                ceiling(one, two),
            )
        )
    lines.append("")
    for rep, (cpu, speed, most) in enumerate(ratios):
        lines.append(
            f"Rep {rep + 1}: one worker's CPU/page / local's: **{cpu:.2f}x** "
            f"(goal <= 1.3x); two workers / one: **{speed:.2f}x** pages/s "
            f"(goal >= 1.8x; the most {os.cpu_count()} cores allow here: {most:.2f}x)."
        )
    lines += crawled_lines(report["crawled"]) if "crawled" in report else []
    lines += [
        "",
        f"### Redis memory per URL ({m['urls']} synthetic requests as the gate makes "
        "them, INFO used_memory deltas)",
        "",
        "| | larbinscrapy | plain scrapy-redis |",
        "|---|---:|---:|",
        f"| seen URL, bytes | {m['larbin_seen_bytes_per_url']:.1f} (Bloom, 0.1%) "
        f"| {m['scrapy_redis_seen_bytes_per_url']:.1f} (SET of SHA1 hex) |",
        f"| queued URL, bytes | {m['larbin_queued_bytes_per_url']:.1f} (tier list: "
        f"{m['larbin_record_bytes']:.0f}-byte record) "
        f"| {m['scrapy_redis_queued_bytes_per_url']:.1f} (ZSET of pickled dicts) |",
    ]
    return "\n".join(lines) + "\n"


# --- a worker's fixed and per-page CPU (issue 33) ---------------------------------------------
SAMPLE_S = 0.02  # seconds between two CPU samples of a running crawl


def _cpu_of(pids: list[int]) -> float:
    """user + sys of ``pids`` now (a process gone counts 0)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def sampled_run(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    log_prefix: Path,
    timeout: float,
    redis_pids: list[int],
) -> dict[str, Any]:
    """Run ``cmd`` to the end, sampling its CPU (and Redis's) every ``SAMPLE_S`` s: the
    samples say how much CPU it had spent when its first and its last page were served."""
    samples: list[tuple[float, float, float]] = []  # (epoch s, crawl CPU s, Redis CPU s)
    with open(f"{log_prefix}.stdout", "wb") as out, open(f"{log_prefix}.stderr", "wb") as err:
        redis0 = _cpu_of(redis_pids)
        start = time.time()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        while True:
            now = time.time()
            cpu = _cpu_of([proc.pid])
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            samples.append((now, cpu, _cpu_of(redis_pids) - redis0))
            if now - start > timeout:
                proc.kill()
            time.sleep(SAMPLE_S)
    end = time.time()
    total = rusage.ru_utime + rusage.ru_stime
    samples.append((end, total, _cpu_of(redis_pids) - redis0))
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "start": start,
        "end": end,
        "cpu_s": total,
        "samples": samples,
    }


def _at(samples: list[tuple[float, float, float]], t: float, col: int) -> float:
    """Column ``col`` of the samples at time ``t`` (linear between the two around it)."""
    prev = samples[0]
    if t <= prev[0]:
        return prev[col]
    for s in samples[1:]:
        if s[0] >= t:
            share = (t - prev[0]) / ((s[0] - prev[0]) or 1e-9)
            return prev[col] + share * (s[col] - prev[col])
        prev = s
    return prev[col]


def from_tree(env: dict[str, str], tree: Path) -> Path:
    """The working directory that runs ``tree``'s code, its ``PYTHONPATH`` set in ``env``:
    ``python -m`` puts the working directory first, ahead of ``PYTHONPATH``."""
    env["PYTHONPATH"] = str(tree)
    return tree


def split_crawl(
    sc: Scenario, web: SynthWeb, rds: Any, work: Path, tag: str, tree: Path | None = None
) -> dict[str, Any]:
    """One crawl (``rds`` None: local; else one worker, of ``tree`` if given), its CPU split
    into before the first page, the pages, after the last page; Redis's CPU apart."""
    redis_pids: list[int] = []
    if rds is not None:
        rds.client.flushall()
        redis_pids = rds.pids()
    log_start = web.log_offset()
    cmd, cwd, env = crawler_command("larbin", sc, web, work, work / f"{tag}.jsonl")
    if rds is not None:
        env["SCRAPY_SETTINGS_MODULE"] = "settings.distributed"
        cmd += ["-s", f"REDIS_URL={rds.url}", "-s", "LARBIN_REDIS_IDLE_BEFORE_CLOSE=1"]
        for kv in getattr(rds, "settings", ()):
            cmd += ["-s", kv]
    if tree is not None:
        cwd = from_tree(env, tree)
    run = sampled_run(cmd, cwd, env, work / tag, 1800, redis_pids)
    entries = web.access_log_entries(log_start)
    fetches = analyze_fetches(web, entries)
    pages = max(1, fetches["pages_fetched"])
    first, last = (entries[0].msec, entries[-1].msec) if entries else (run["end"], run["end"])
    s = run["samples"]
    at_first, at_last = _at(s, first, 1), _at(s, last, 1)
    redis_first, redis_last, redis_all = _at(s, first, 2), _at(s, last, 2), s[-1][2]
    mode = "local" if rds is None else f"worker{'' if tree is None else ' (base)'}"
    return {
        "mode": mode,
        "exit_code": run["exit_code"],
        "pages": fetches["pages_fetched"],
        "coverage": fetches["coverage"],
        "duplicates": fetches["duplicates"],
        "wall_s": run["end"] - run["start"],
        "cpu_s": run["cpu_s"],
        "before_s": at_first,
        "after_s": run["cpu_s"] - at_last,
        "before_wall_s": first - run["start"],
        "after_wall_s": run["end"] - last,
        "page_ms": 1000 * (at_last - at_first) / pages,
        "ms_per_page": 1000 * run["cpu_s"] / pages,
        "redis_cpu_s": redis_all,
        "redis_ms_per_page": 1000 * redis_all / pages,
        "redis_fixed_s": redis_first + redis_all - redis_last,
    }


def split_report(args: argparse.Namespace, work: Path) -> str:
    """``--split``: local and one worker (and the ``--base`` tree's worker), alternated."""
    sc = Scenario("cpu", args.hosts, args.pages, 0.0, 1, 8, 100)
    rds = RedisProcess(work)
    rows: list[dict[str, Any]] = []
    try:
        with SynthWeb(
            sc.hosts, sc.pages_per_host, workdir=str(work / "web"), links=args.links
        ) as web:
            target = ClusterRedis(work) if args.cluster else rds
            try:
                for rep in range(args.reps):
                    trees: list[tuple[Any, Path | None]] = [(None, None), (target, None)]
                    if args.base:
                        trees.append((target, args.base))
                    for server, tree in trees:
                        row = split_crawl(sc, web, server, work, f"s{rep}-{len(rows)}", tree)
                        row["rep"] = rep + 1
                        rows.append(row)
                        print(
                            f"  {row['mode']}: {row['pages']} pages, {row['ms_per_page']:.2f}"
                            f" ms/page",
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                if target is not rds:
                    target.stop()
            where = "a 3-master Redis Cluster" if args.cluster else "one Redis"
            title = (
                f"## A worker's fixed and per-page CPU: {len(web.pages)} pages "
                f"({sc.hosts} hosts), {args.links or '30-60'} links a page, {where}"
            )
    finally:
        rds.stop()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return render_split(title, rows)


def render_split(title: str, rows: list[dict[str, Any]]) -> str:
    lines = [
        title,
        "",
        "| rep | mode | pages | dup | wall s | CPU s | before 1st page s (wall) "
        "| after last s (wall) | per-page CPU ms | whole CPU ms/page | x local "
        "| Redis CPU ms/page | Redis fixed s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    local = 0.0
    for r in rows:
        if r["mode"] == "local":
            local = r["ms_per_page"]
        lines.append(
            f"| {r['rep']} | {r['mode']} | {r['pages']} | {r['duplicates']} "
            f"| {r['wall_s']:.1f} | {r['cpu_s']:.2f} | {r['before_s']:.2f} "
            f"({r['before_wall_s']:.1f}) | {r['after_s']:.2f} ({r['after_wall_s']:.1f}) "
            f"| {r['page_ms']:.2f} | {r['ms_per_page']:.2f} "
            f"| {r['ms_per_page'] / (local or 1e-9):.2f}x "
            f"| {r['redis_ms_per_page']:.2f} | {r['redis_fixed_s']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _commands(rds: Any) -> int:
    """Commands Redis ran so far (``INFO commandstats``, Lua's own included; INFO, PING and
    CLUSTER apart), over every node."""
    nodes = getattr(rds, "nodes", None) or [rds.client]
    skip = ("cmdstat_info", "cmdstat_ping", "cmdstat_cluster")
    return sum(
        v["calls"] for n in nodes for k, v in n.info("commandstats").items() if k not in skip
    )


def idle_rate(
    sc: Scenario,
    web: SynthWeb,
    rds: Any,
    work: Path,
    tag: str,
    tree: Path | None = None,
    seconds: float = 10.0,
) -> float:
    """Commands a second a keep-alive worker sends once its crawl is done (it waits for
    work): what an idle worker costs Redis."""
    rds.client.flushall()
    log_start = web.log_offset()
    cmd, cwd, env = crawler_command("larbin", sc, web, work, work / f"{tag}.jsonl")
    env["SCRAPY_SETTINGS_MODULE"] = "settings.distributed"
    cmd += ["-s", f"REDIS_URL={rds.url}", "-s", "LARBIN_REDIS_KEEP_ALIVE=True"]
    for kv in getattr(rds, "settings", ()):
        cmd += ["-s", kv]
    if tree is not None:
        cwd = from_tree(env, tree)
    with open(work / f"{tag}.stderr", "wb") as err:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            start_new_session=True,
        )
        try:
            total, last, quiet_since = len(web.pages), -1, time.time()
            while time.time() - quiet_since < 4:  # every page fetched, then 4 s of nothing
                n = len(web.access_log_entries(log_start))
                if n != last:
                    last, quiet_since = n, time.time()
                time.sleep(0.2)
                if proc.poll() is not None:
                    raise RuntimeError(f"the worker ended (see {work / tag}.stderr)")
            print(f"  idle after {last} requests ({total} pages)", file=sys.stderr, flush=True)
            before, t0 = _commands(rds), time.monotonic()
            time.sleep(seconds)
            return (_commands(rds) - before) / (time.monotonic() - t0)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)


def idle_report(args: argparse.Namespace, work: Path) -> str:
    """``--idle``: Redis commands a second of an idle keep-alive worker (and ``--base``'s)."""
    sc = Scenario("cpu", args.hosts, args.pages, 0.0, 1, 8, 100)
    rds = RedisProcess(work)
    lines = []
    try:
        with SynthWeb(sc.hosts, sc.pages_per_host, workdir=str(work / "web")) as web:
            target = ClusterRedis(work) if args.cluster else rds
            try:
                for name, tree in (("this tree", None), ("--base", args.base)):
                    if name == "--base" and tree is None:
                        continue
                    rate = idle_rate(sc, web, target, work, f"idle-{len(lines)}", tree)
                    lines.append(f"| {name} | {rate:.1f} |")
            finally:
                if target is not rds:
                    target.stop()
    finally:
        rds.stop()
    where = "a 3-master Redis Cluster" if args.cluster else "one Redis"
    return (
        "\n".join(
            [
                f"## An idle keep-alive worker, {where}: Redis commands a second",
                "",
                "| worker | commands/s |",
                "|---|---:|",
                *lines,
            ]
        )
        + "\n"
    )


# --- capacity: Redis memory per host, CPU, network and commands per page (issue 33, point 3) ---
CAPACITY_FIRST_IP = "127.44.0.1"  # the capacity benchmark's range: 127.44.0.0/16
_KEY_SHAPES = (  # (regex, placeholder): a key's per-entity parts, so keys group by kind
    (r"\{[^}]*\}", "{tag}"),
    (r"(https?://)?h\d+\.scale\.test(:\d+)?", "<site>"),
    (r"127\.\d+\.\d+\.\d+", "<ip>"),
    (r"(lease|held|seeds):[^:]+$", r"\1:<worker>"),
    (r"seen:\d+$", "seen:<n>"),
)


def key_kind(key: str) -> str:
    """``{s3.32}larbin:frontier:site:http://h7.scale.test:4000`` -> ``{tag}...:site:<site>``."""
    import re

    for pattern, repl in _KEY_SHAPES:
        key = re.sub(pattern, repl, key)
    return key


def _elements(node: Any, key: bytes, kind: bytes) -> int:
    """Entries of a hash, set, zset or list; 1 for a string."""
    return int(
        {b"hash": node.hlen, b"set": node.scard, b"zset": node.zcard, b"list": node.llen}.get(
            kind, lambda k: 1
        )(key)
    )


def key_census(nodes: list[Any]) -> dict[str, dict[str, int]]:
    """Every key of every node grouped by ``key_kind``: keys, ``MEMORY USAGE`` bytes, entries."""
    out: dict[str, dict[str, int]] = {}
    for node in nodes:
        for key in node.scan_iter(count=1000):
            kind = node.type(key)
            row = out.setdefault(
                f"{key_kind(key.decode())} ({kind.decode()})", {"keys": 0, "bytes": 0, "entries": 0}
            )
            row["keys"] += 1
            row["bytes"] += int(node.memory_usage(key, samples=0) or 0)
            row["entries"] += _elements(node, key, kind)
    return out


def node_counters(nodes: list[Any]) -> list[dict[str, float]]:
    """Per node: CPU s, bytes in/out, commands run, used memory (``INFO``)."""
    rows = []
    for node in nodes:
        info = node.info("all")
        skip = ("cmdstat_info", "cmdstat_ping", "cmdstat_cluster", "cmdstat_memory", "cmdstat_scan")
        rows.append(
            {
                "cpu_s": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
                "net_in": float(info["total_net_input_bytes"]),
                "net_out": float(info["total_net_output_bytes"]),
                "commands": float(
                    sum(
                        v["calls"]
                        for k, v in info.items()
                        if k.startswith("cmdstat_") and k not in skip
                    )
                ),
                "scripts": float(
                    sum(info.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("evalsha", "eval"))
                ),
                "used_memory": float(info["used_memory"]),
            }
        )
    return rows


def _queued(nodes: list[Any]) -> int:
    """URLs queued in the frontier now (every shard's ``count`` hash)."""
    total = 0
    for node in nodes:
        for key in node.scan_iter(match="*larbin:frontier:count", count=1000):
            total += int(node.hget(key, "queued") or 0)
    return total


def _capacity_settings(crawl_dir: Path) -> None:
    """The worker's settings module: the distributed profile with every name pinned."""
    (crawl_dir / "scale_settings.py").write_text(
        "import json, pathlib\nfrom settings.distributed import *  # noqa: F403\n"
        f"LARBIN_RESOLVE = json.loads(pathlib.Path({str(crawl_dir / 'resolve.json')!r})"
        ".read_text())\n",
        encoding="utf-8",
    )


def capacity_crawl(
    rds: Any, work: Path, hosts: int, pages: int, hosts_per_ip: int
) -> dict[str, Any]:
    """One worker crawls a ``hosts``-host web (``testweb.manyhosts``) into ``rds``; Redis's
    counters per node before and after, and a census of the keys left."""
    from testweb import manyhosts

    nodes = getattr(rds, "nodes", None) or [rds.client]
    rds.client.flushall()
    base_memory = [int(n.info("memory")["used_memory"]) for n in nodes]
    with manyhosts.served(work, hosts, pages, CAPACITY_FIRST_IP, hosts_per_ip) as (
        port,
        seeds,
        env,
    ):
        _capacity_settings(work / "crawl")
        settings: dict[str, object] = {"REDIS_URL": rds.url, "LARBIN_REDIS_IDLE_BEFORE_CLOSE": 1}
        settings.update(kv.split("=", 1) for kv in getattr(rds, "settings", ()))
        load = os.getloadavg()[0]
        before = node_counters(nodes)
        started = time.monotonic()
        with open(work / "crawl.log", "wb") as log:
            proc = subprocess.Popen(
                manyhosts.crawl_command(seeds, settings),
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
            )
            _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        after = node_counters(nodes)
    records = manyhosts.read_log(work / "web" / manyhosts.LOG)
    fetched = len(manyhosts.summary(records, port)["pages"])
    return {
        "exit": os.waitstatus_to_exitcode(status),
        "hosts": hosts,
        "pages": fetched,
        "requests": len(records),
        "coverage": fetched / (hosts * pages),
        "wall_s": wall,
        "worker_cpu_s": usage.ru_utime + usage.ru_stime,
        "load": [load, os.getloadavg()[0]],
        "base_memory": base_memory,
        "nodes": [
            {k: a[k] - b[k] for k in a} | {"used_memory": a["used_memory"]}
            for a, b in zip(after, before, strict=True)
        ],
        "census": key_census(nodes),
    }


def render_capacity(where: str, r: dict[str, Any]) -> str:
    """One crawl's capacity figures as markdown (per node, then the key census)."""
    pages, hosts = max(1, r["pages"]), r["hosts"]
    lines = [
        f"### {where}: {hosts:,} hosts, {r['pages']:,} pages ({r['requests']:,} requests, "
        f"coverage {r['coverage']:.4f}, exit {r['exit']}), {r['wall_s']:.0f} s, worker "
        f"{1000 * r['worker_cpu_s'] / pages:.2f} ms CPU/page, load {r['load'][0]:.1f}"
        f"-{r['load'][1]:.1f}",
        "",
        "| node | Redis CPU ms/page | net in B/page | net out B/page | commands/page "
        "| scripts/page | used_memory MB (empty) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    total = dict.fromkeys(("cpu_s", "net_in", "net_out", "commands", "scripts"), 0.0)
    for i, (n, empty) in enumerate(zip(r["nodes"], r["base_memory"], strict=True)):
        for k in total:
            total[k] += n[k]
        lines.append(
            f"| {i} | {1000 * n['cpu_s'] / pages:.3f} | {n['net_in'] / pages:.0f} "
            f"| {n['net_out'] / pages:.0f} | {n['commands'] / pages:.1f} "
            f"| {n['scripts'] / pages:.2f} | {n['used_memory'] / 1e6:.2f} ({empty / 1e6:.2f}) |"
        )
    if len(r["nodes"]) > 1:
        lines.append(
            f"| all | {1000 * total['cpu_s'] / pages:.3f} | {total['net_in'] / pages:.0f} "
            f"| {total['net_out'] / pages:.0f} | {total['commands'] / pages:.1f} "
            f"| {total['scripts'] / pages:.2f} | |"
        )
    lines += [
        "",
        "| key (after the crawl) | keys | entries | bytes | bytes/host | bytes/page |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    census = sorted(r["census"].items(), key=lambda kv: -kv[1]["bytes"])
    for kind, c in census:
        lines.append(
            f"| `{kind}` | {c['keys']:,} | {c['entries']:,} | {c['bytes']:,} "
            f"| {c['bytes'] / hosts:.1f} | {c['bytes'] / pages:.1f} |"
        )
    seen = sum(c["bytes"] for k, c in census if ":seen" in k)
    dup = sum(c["bytes"] for k, c in census if "contentdup" in k)
    rest = sum(c["bytes"] for k, c in census) - seen - dup
    grown = sum(n["used_memory"] for n in r["nodes"]) - sum(r["base_memory"])
    lines += [
        "",
        f"used_memory grew {grown / 1e6:.2f} MB: seen bits {seen / 1e6:.2f} MB (fixed size), "
        f"content hashes {dup / pages:.1f} B/page, every other key {rest / hosts:.1f} B/host "
        f"({rest / pages:.1f} B/page).",
    ]
    return "\n".join(lines) + "\n"


def capacity_held(
    rds: Any, work: Path, hosts: int, pages: int, hosts_per_ip: int
) -> dict[str, Any]:
    """URLs queued on every host: a crawl whose hosts wait an hour between two fetches
    (``DOWNLOAD_DELAY=3600``; no robots.txt, no sitemaps; revisits on) fetches each start page
    and then holds the links it found; the key census is taken then, while the worker runs."""
    from testweb import manyhosts

    nodes = getattr(rds, "nodes", None) or [rds.client]
    rds.client.flushall()
    with manyhosts.served(work, hosts, pages, CAPACITY_FIRST_IP, hosts_per_ip) as (
        _port,
        seeds,
        env,
    ):
        _capacity_settings(work / "crawl")
        settings: dict[str, object] = {
            "REDIS_URL": rds.url,
            "DOWNLOAD_DELAY": 3600,
            "ROBOTSTXT_OBEY": False,  # a robots.txt would take the start page's turn
            "LARBIN_SITEMAPS": False,  # so would /sitemap.xml
            "LARBIN_REVISIT": True,  # each fetched page in the revisit schedule
        }
        settings.update(kv.split("=", 1) for kv in getattr(rds, "settings", ()))
        log_path = work / "web" / manyhosts.LOG
        with open(work / "held.log", "wb") as log:
            proc = subprocess.Popen(
                manyhosts.crawl_command(seeds, settings),
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )
            try:
                last, stable, deadline = (-1, -1), 0, time.monotonic() + 300
                while stable < 4 and time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(1)  # the server's log is flushed every second
                    now = (len(manyhosts.read_log(log_path)), _queued(nodes))
                    stable = stable + 1 if now == last and now[1] else 0
                    last = now
                census = key_census(nodes)
                used = sum(int(n.info("memory")["used_memory"]) for n in nodes)
            finally:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=120)
    return {
        "hosts": hosts,
        "requests": last[0],
        "queued": last[1],
        "used_memory": used,
        "census": census,
    }


def render_held(where: str, r: dict[str, Any]) -> str:
    """The census while URLs wait on every host: bytes per host and per queued URL."""
    hosts, queued = r["hosts"], max(1, r["queued"])
    lines = [
        f"### {where}, URLs held on every host: {hosts:,} hosts, {r['queued']:,} URLs queued "
        f"after {r['requests']:,} requests",
        "",
        "| key (while queued) | keys | entries | bytes | bytes/host (= /fetched page) "
        "| bytes/queued URL |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    census = sorted(r["census"].items(), key=lambda kv: -kv[1]["bytes"])
    for kind, c in census:
        lines.append(
            f"| `{kind}` | {c['keys']:,} | {c['entries']:,} | {c['bytes']:,} "
            f"| {c['bytes'] / hosts:.1f} | {c['bytes'] / queued:.1f} |"
        )
    return "\n".join(lines) + "\n"


def capacity_report(args: argparse.Namespace, work: Path) -> str:
    """``--capacity``: the many-host crawl on one Redis, then on a 3-master cluster."""
    out = []
    rows = {}
    for where in ("one Redis", "a 3-master Redis Cluster"):
        if where != "one Redis" and args.no_cluster:
            continue
        sub = work / where.split()[-1].lower()
        sub.mkdir()
        rds = RedisProcess(sub) if where == "one Redis" else ClusterRedis(sub)
        try:
            row = capacity_crawl(rds, sub / "crawl", args.capacity_hosts, args.capacity_pages, 10)
            held = capacity_held(rds, sub / "held", args.capacity_hosts, args.capacity_pages, 10)
        finally:
            rds.stop()
        rows[where] = {"crawl": row, "held": held}
        print(f"  {where}: {row['pages']} pages", file=sys.stderr, flush=True)
        out += [render_capacity(where, row), render_held(where, held)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=10)
    p.add_argument("--pages", type=int, default=40)
    p.add_argument(
        "--large",
        action="store_true",
        help="60 hosts x 300 pages: a two-worker crawl of more than 30 s",
    )
    p.add_argument("--reps", type=int, default=1)
    p.add_argument(
        "--cluster",
        action="store_true",
        help="the workers on a 3-master Redis Cluster on loopback (memory: one Redis)",
    )
    p.add_argument("--urls", type=int, default=100_000)
    p.add_argument("--fanout-hosts", type=int, default=4)
    p.add_argument("--fanout-links", type=int, default=2000)
    p.add_argument(
        "--memory-repo",
        type=Path,
        default=REPO,
        help="the tree whose worker makes the crawled requests (default: this one)",
    )
    p.add_argument(
        "--memory-only",
        action="store_true",
        help="only the memory figures (no crawl of the synthetic web)",
    )
    p.add_argument("--json", type=Path)
    p.add_argument(
        "--split",
        action="store_true",
        help="local and one worker: CPU before the first page, per page, after the last",
    )
    p.add_argument("--links", type=int, default=None, help="links a page (default 30-60)")
    p.add_argument(
        "--base",
        type=Path,
        default=None,
        help="--split: also a worker of this checkout (before/after, alternated)",
    )
    p.add_argument(
        "--idle",
        action="store_true",
        help="Redis commands a second of an idle keep-alive worker (and --base's)",
    )
    p.add_argument(
        "--capacity",
        action="store_true",
        help="Redis memory per host, CPU, network and commands per page (many hosts)",
    )
    p.add_argument("--capacity-hosts", type=int, default=2000)
    p.add_argument("--capacity-pages", type=int, default=4, help="--capacity: pages a host")
    p.add_argument("--no-cluster", action="store_true", help="--capacity: one Redis only")
    args = p.parse_args(argv)
    if args.capacity:
        work = Path(tempfile.mkdtemp(prefix="larbin-bench-capacity-"))
        try:
            print(capacity_report(args, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    if args.split or args.idle:
        work = Path(tempfile.mkdtemp(prefix="larbin-bench-split-"))
        try:
            print(idle_report(args, work) if args.idle else split_report(args, work))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    if args.large:
        args.hosts, args.pages = 60, 300
    work = Path(tempfile.mkdtemp(prefix="larbin-bench-dist-"))
    sc = Scenario("cpu", args.hosts, args.pages, 0.0, 1, 8, 100)
    rds = RedisProcess(work)
    try:
        report: dict[str, Any] = {"memory": memory(rds, args.urls)}
        report["crawled"] = memory_crawled(
            rds, work, args.fanout_hosts, args.fanout_links, args.memory_repo.resolve()
        )
        if args.memory_only:
            print(render_memory(report))
            return 0
        with SynthWeb(sc.hosts, sc.pages_per_host, workdir=str(work / "web")) as web:
            report["web"] = {"hosts": sc.hosts, "pages": len(web.pages)}
            target = ClusterRedis(work) if args.cluster else rds
            try:
                report["reps"] = [
                    one_repetition(sc, web, target, work, rep) for rep in range(args.reps)
                ]
            finally:
                if target is not rds:
                    target.stop()
            report["redis"] = "a 3-master Redis Cluster" if args.cluster else "one Redis"
    finally:
        rds.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = render(report)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
