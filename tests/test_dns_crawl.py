"""A crawl through the system resolver, as a broad crawl meets DNS (issue 35, point 2).

A network namespace whose ``/etc/resolv.conf`` names a real DNS server on port 53 of a loopback
address inside it (tests/support/dnsserver.py); thousands of hosts over a few dozen addresses
(shared hosting, tests/support/anyhost.py), 5% of names failing (NXDOMAIN, SERVFAIL), 1% never
answered, some behind CNAMEs, a few with only an IPv6 address. No ``LARBIN_RESOLVE``: every
name goes through DNS. Every live host must be crawled (the generator's truth), and only the
failing names dropped for DNS. getaddrinfo in the thread pool lost more than half of the live
hosts here: 20 threads at 100 ms a name is 200 names a second, silent names held threads for
resolv.conf's 2 x 5 s, and the names queued behind them timed out (LARBIN_DNS_TIMEOUT counted
their time in the queue).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.marks import require_crawl_marker

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
HOSTS = 3000
FAILING, SILENT = 0.05, 0.01
IPS = [f"127.24.1.{i}" for i in range(1, 41)]
DNS_IP = "127.24.0.53"
LATENCY = 0.1  # seconds before each DNS answer (an uncached name: 50-500 ms on the web)


def generate(seed: int) -> tuple[dict[str, dict[str, Any]], set[str], set[str]]:
    """The zone, the live names and the failing ones (the generator's truth)."""
    rng = random.Random(seed)
    zone: dict[str, dict[str, Any]] = {}
    live, failing = set(), set()
    for i in range(HOSTS):
        name = f"h{i:05d}.example.test"
        draw = rng.random()
        if draw < FAILING / 2:
            failing.add(name)  # not in the zone: NXDOMAIN
        elif draw < FAILING:
            zone[name] = {"rcode": "SERVFAIL"}
            failing.add(name)
        elif draw < FAILING + SILENT:
            zone[name] = {"silent": True}
            failing.add(name)
        elif draw < FAILING + SILENT + 0.1:
            edge = f"edge{i % 7}.cdn.test"
            zone[name] = {"cname": edge, "ttl": rng.choice([30, 300, 3600])}
            zone[edge] = {"a": [IPS[i % 7]]}
            live.add(name)
        else:
            zone[name] = {"a": [rng.choice(IPS)], "ttl": rng.choice([5, 60, 300, 86400])}
            live.add(name)
    for i in range(3):  # IPv6 only
        zone[f"six{i}.example.test"] = {"aaaa": ["::1"]}
        live.add(f"six{i}.example.test")
    return zone, live, failing


class Namespace:
    """``ip netns`` named ``dns-<pid>`` with its own resolv.conf; removed at exit."""

    def __init__(self) -> None:
        self.name = f"dns-{os.getpid()}"
        self.etc = Path("/etc/netns") / self.name
        self.procs: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Namespace:
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        self.etc.mkdir(parents=True, exist_ok=True)
        # no options: glibc's and c-ares' defaults, 5 s a try, 2 tries
        (self.etc / "resolv.conf").write_text(f"nameserver {DNS_IP}\n")
        self.run(["ip", "link", "set", "lo", "up"])
        return self

    def command(self, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *args]

    def run(self, args: list[str]) -> None:
        subprocess.run(self.command(args), check=True)

    def start(self, args: list[str], ready: str) -> None:
        """Start a server in the namespace; wait for the line ``ready`` on its output."""
        proc = subprocess.Popen(self.command(args), cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == ready, f"{args}: {line!r}"

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", self.name], check=False)
        shutil.rmtree(self.etc, ignore_errors=True)


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    require_crawl_marker("a network namespace")
    with Namespace() as ns:
        yield ns


@pytest.mark.crawl
def test_every_live_host_crawled_through_the_system_resolver(tmp_path, namespace):
    zone, live, failing = generate(seed=35)
    (tmp_path / "zone.json").write_text(json.dumps(zone))
    namespace.start([sys.executable, "-m", "tests.support.dnsserver", DNS_IP, "53",
                     str(tmp_path / "zone.json"), str(LATENCY)], ready="53")
    log = tmp_path / "web.log"
    namespace.start([sys.executable, "-m", "tests.support.anyhost", str(log), *IPS, "::1"],
                    ready="ready")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://{name}/\n" for name in sorted(live | failing)))
    settings = {
        "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128", "DOWNLOAD_DELAY": 0,
        "LARBIN_STATS_FILE": tmp_path / "stats.json", "LOG_LEVEL": "INFO",
        # a silent name costs resolv.conf's 2 x 5 s a try: one try again, soon
        "LARBIN_DNS_RETRIES": 1, "LARBIN_DNS_RETRY_DELAY": 1,
        "LARBIN_SITEMAPS": False,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin", "-a", f"seeds={seeds}"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value}"]
    with open(tmp_path / "crawl.log", "w") as err:
        proc = subprocess.run(namespace.command(cmd), cwd=ROOT, stdout=err,
                              stderr=subprocess.STDOUT, timeout=180, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    crawl_log = (tmp_path / "crawl.log").read_text()
    assert proc.returncode == 0, crawl_log[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    crawled = {line.split("\t")[0] for line in log.read_text().splitlines()
               if line.endswith("\t/")}
    missing = live - crawled
    assert not missing, (f"{len(missing)} of {len(live)} live hosts never crawled, e.g. "
                         f"{sorted(missing)[:5]}; dns stats: "
                         f"{ {k: v for k, v in stats.items() if 'dns' in k} }")
    assert crawled <= live
    assert stats.get("larbin/dropped/dns") == len(failing)
    assert "Traceback" not in crawl_log


RESOLV_CONF_PROBE = """
import json, sys, time
from twisted.internet import reactor
from larbinscrapy.politeness.resolver import AresResolver
from tests.support.dnsserver import DnsServer, Name

zone = {"ok.test": Name(a=["93.184.216.34"]), "silent.test": Name(silent=True)}
got = {}
with DnsServer(zone, sys.argv[1], 53) as dns:
    resolver = AresResolver(reactor)
    for name in zone:
        resolver.lookup(name).addBoth(lambda r, n=name: got.__setitem__(
            n, getattr(r.value, "outcome", None) if hasattr(r, "value") else r.ip))
    def check():
        if len(got) == 2:
            reactor.stop()
        else:
            reactor.callLater(0.05, check)
    check()
    reactor.run()
    got["silent_queries"] = dns.queries[("silent.test", "A")]
print(json.dumps(got))
"""


@pytest.mark.crawl
def test_the_resolver_reads_resolv_conf(namespace):
    """Nameserver, timeout and attempts from the system's configuration (c-ares alone: 3)."""
    (namespace.etc / "resolv.conf").write_text(
        f"nameserver {DNS_IP}\noptions timeout:1 attempts:1\n")
    out = subprocess.run(namespace.command([sys.executable, "-c", RESOLV_CONF_PROBE, DNS_IP]),
                         cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert json.loads(out.stdout) == {"ok.test": "93.184.216.34", "silent.test": "timeout",
                                      "silent_queries": 1}
