"""A crawl through the system resolver, as a broad crawl meets DNS (issue 35, point 2).

The simulated internet (``testweb/internet/``) in a network namespace whose ``/etc/resolv.conf``
names its DNS server on port 53 of a loopback address inside it: 3,000 hosts over a few hundred
addresses (shared hosting), 5% of names failing (NXDOMAIN, SERVFAIL), 1% never answered, CNAME
chains, IPv6-only names, answers truncated over UDP, ~100 ms a DNS answer. No
``LARBIN_RESOLVE``: every name goes through DNS. Each seed's host must be crawled exactly when
the generator says its name resolves, and only the failing names dropped for DNS.
getaddrinfo in the thread pool lost more than half of the live hosts here: 20 threads at 100 ms
a name is 200 names a second, silent names held threads for resolv.conf's 2 x 5 s, and the
names queued behind them timed out (DNS_TIMEOUT counted their time in the queue).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.marks import require_crawl_marker
from testweb.internet.logs import read_web
from testweb.internet.model import Internet, Latency, Mix
from testweb.internet.netns import Namespace

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
HOSTS, SEED = 3000, 35
BASE = "127.24.0.0"  # the internet's addresses: base + 1 ...
DNS_IP = "127.24.255.53"
# DNS is under test: every other failure of the simulated internet off, seeds only
MIX = Mix(
    nxdomain=0.025,
    servfail=0.025,
    silent_dns=0.01,
    cname=0.1,
    aaaa_only=0.01,
    big_answer=0.005,
    dead=0,
    tarpit=0,
    https=0,
    www=0,
    robots=(("allow", 1.0),),
)
LATENCY = Latency(dns_ms=100)  # an uncached name: 50-500 ms on the web

SERVE = """
import signal, sys
from testweb.internet.harness import InternetThread
from testweb.internet.model import Internet, Latency, Mix
from pathlib import Path

hosts, seed, base, dns, logdir = sys.argv[1:6]
internet = Internet(int(hosts), int(seed), base=base, mix=Mix(**MIX), latency=Latency(**LATENCY))
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
with InternetThread(internet, Path(logdir), dns=(dns, 53), ipv6=True):  # its own ::1
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM})
"""


def internet() -> Internet:
    return Internet(HOSTS, SEED, base=BASE, mix=MIX, latency=LATENCY)


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    """``dns-<pid>``; resolv.conf without options: 5 s a try, 2 tries (glibc's and c-ares')."""
    require_crawl_marker("a network namespace")
    with Namespace(DNS_IP, options="", name=f"dns-{os.getpid()}") as ns:
        yield ns


def serve(namespace: Namespace, logdir: Path) -> subprocess.Popen[str]:
    """The simulated internet (DNS and web) in the namespace, started and listening."""
    params = {"MIX": repr(MIX.__dict__), "LATENCY": repr(LATENCY.__dict__)}
    code = SERVE.replace("Mix(**MIX)", f"Mix(**{params['MIX']})").replace(
        "Latency(**LATENCY)", f"Latency(**{params['LATENCY']})"
    )
    proc = namespace.popen(
        [sys.executable, "-c", code, str(HOSTS), str(SEED), BASE, DNS_IP, str(logdir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == "ready", f"the simulated internet did not start: {line!r}"
    return proc


@pytest.mark.crawl
def test_every_live_host_crawled_through_the_system_resolver(tmp_path, namespace):
    web = internet()
    hosts = [web.host(i) for i in range(HOSTS)]
    live = {h.name for h in hosts if h.dns == "ok"}
    failing = {h.name for h in hosts if h.dns != "ok"}
    assert failing and any(h.dns == "silent" for h in hosts)
    assert any(h.cname for h in hosts if h.dns == "ok") and any(h.family == "6" for h in hosts)
    server = serve(namespace, tmp_path / "internet")
    try:
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        settings = {
            "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
            "DOWNLOAD_DELAY": 0,
            "LARBIN_STATS_FILE": tmp_path / "stats.json",
            "LOG_LEVEL": "INFO",
            "LARBIN_DEPTH": 0,
            "LARBIN_EXTERNAL": False,
            "LARBIN_SITEMAPS": False,
            "ROBOTSTXT_OBEY": False,  # one request a host: the names are under test
            # a silent name costs resolv.conf's 2 x 5 s a try: one try again, soon
            "LARBIN_DNS_RETRIES": 1,
            "LARBIN_DNS_RETRY_DELAY": 1,
        }
        cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin", "-a", f"seeds={seeds}"]
        for key, value in settings.items():
            cmd += ["-s", f"{key}={value}"]
        with open(tmp_path / "crawl.log", "w") as err:
            proc = subprocess.run(
                namespace.command(cmd),
                cwd=ROOT,
                stdout=err,
                stderr=subprocess.STDOUT,
                timeout=180,
                check=False,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
    finally:
        server.terminate()
        server.wait(30)
    crawl_log = (tmp_path / "crawl.log").read_text()
    assert proc.returncode == 0, crawl_log[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    crawled = {e.host for e in read_web(str(tmp_path / "internet" / "web.log")) if e.path == "/"}
    missing = live - crawled
    assert not missing, (
        f"{len(missing)} of {len(live)} live hosts never crawled, e.g. "
        f"{sorted(missing)[:5]}; dns stats: "
        f"{ {k: v for k, v in stats.items() if 'dns' in k} }"
    )
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
        f"nameserver {DNS_IP}\noptions timeout:1 attempts:1\n"
    )
    out = subprocess.run(
        namespace.command([sys.executable, "-c", RESOLV_CONF_PROBE, DNS_IP]),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert json.loads(out.stdout) == {
        "ok.test": "93.184.216.34",
        "silent.test": "timeout",
        "silent_queries": 1,
    }
