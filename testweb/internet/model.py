"""The simulated internet as a pure function of ``(seed, hostname)``: no I/O, no files per host.

A host is ``h{i}.{domain}`` for ``0 <= i < hosts``. Everything about it (its DNS fate and TTL,
CNAME chain, address, scheme, ``www.`` redirect, robots.txt variant, page count, latency,
bandwidth, whether it is silent) is drawn from a ``random.Random`` seeded with a hash of
``(seed, i)``, so the DNS server, the web server, the seeds file and the analyzer's truth all
compute the same host without sharing any state, at any scale.

Addresses: ``base + 1 + k``. ``k < BIG`` are a few shared-hosting addresses carrying half of the
hosts not on their own address; then ``medium`` addresses carrying the other half; then a long
tail of ``tail`` addresses with exactly one host each (a bijection ``i -> (i*step + offset) mod
hosts`` picks them); then a block of ``big_records`` addresses that only hosts with an oversized
DNS answer use.
Some tail addresses are dead (nothing listens). Every listening address serves every host by
its Host header, as shared hosting does.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import random
import re
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

BIG = 5  # shared-hosting addresses that carry thousands of names at 10^5 hosts
FANOUT = 30  # page k links to pages FANOUT*k+1 .. FANOUT*k+FANOUT: depth <= 3 up to MAX_PAGES
MAX_PAGES = 2000
CNAME_MAX = 3
PAGES_ALPHA = 1.15  # Pareto: mean ~5 pages a host (capped at MAX_PAGES), median 1
IPV6_LOOPBACK = "::1"  # the only IPv6 loopback address: every AAAA-only host is served there

# the generator's own source: the analyzer checks that the server it reads ran the same one
SOURCE_VERSION = hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:12]

ROBOTS_TEXT = {
    "allow": "User-agent: *\nAllow: /\n",
    "disallow": "User-agent: *\nDisallow: /p1\nDisallow: /p7.html\n",
    "delay": "User-agent: *\nCrawl-delay: 1\nAllow: /\n",
}
ROBOTS_STATUS = {"allow": 200, "disallow": 200, "delay": 200, "404": 404, "5xx": 503}


@dataclass(frozen=True)
class Mix:
    """Shares of hosts (or tail addresses, for ``dead``) with each behaviour."""

    nxdomain: float = 0.02
    servfail: float = 0.015
    silent_dns: float = 0.01  # the DNS server never answers for the name
    cname: float = 0.10
    aaaa_only: float = 0.01
    big_answer: float = 0.005  # an A answer larger than 512 bytes: truncated over UDP
    dead: float = 0.05  # tail addresses where nothing listens
    tarpit: float = 0.01  # hosts whose server accepts, reads and never answers
    https: float = 0.5
    www: float = 0.2
    robots: tuple[tuple[str, float], ...] = (
        ("allow", 0.60),
        ("404", 0.20),
        ("disallow", 0.12),
        ("5xx", 0.03),
        ("delay", 0.05),
    )

    @classmethod
    def none(cls) -> Mix:
        """No failures and no variants: every host answers, http, robots allow all."""
        return cls(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (("allow", 1.0),))


@dataclass(frozen=True)
class Latency:
    """Medians in milliseconds (0 = none); each host/name draws a log-normal factor around it."""

    dns_ms: float = 0.0
    ttfb_ms: float = 0.0
    bandwidth: float = 0.0  # median bytes/s of a host, 0 = unlimited
    sigma: float = 0.5


@dataclass(frozen=True)
class Host:
    """One host as the generator made it."""

    index: int
    name: str  # h{i}.{domain}: what links and seeds name
    canonical: str  # the name serving pages (``www.`` + name when ``www``)
    dns: str  # ok | nxdomain | servfail | silent
    ttl: int
    cname: int  # length of the CNAME chain before the address records
    family: str  # "4" or "6" (AAAA only, answered with ::1)
    addresses: tuple[str, ...]
    dead: bool  # its address has nothing listening
    tarpit: bool
    https: bool
    www: bool
    robots: str
    pages: int
    ttfb: float  # seconds
    bandwidth: float  # bytes/s, 0 = unlimited
    dns_delay: float  # seconds
    links_seed: int = field(repr=False)

    @property
    def scheme(self) -> str:
        return "https" if self.https else "http"

    @property
    def live(self) -> bool:
        """Answers HTTP: its name resolves and its address answers."""
        return self.dns == "ok" and not self.dead and not self.tarpit


def _hash(*parts: object) -> int:
    text = ":".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def page_path(k: int) -> str:
    return "/" if k == 0 else f"/p{k}.html"


_PAGE = re.compile(r"/p([1-9][0-9]{0,5})\.html\Z")


def page_index(path: str) -> int | None:
    """The page number of a path (``/`` is 0), or None for a path no host serves."""
    if path == "/":
        return 0
    m = _PAGE.match(path)
    return int(m.group(1)) if m else None


class Internet:
    """The generator: hosts, addresses and DNS answers for ``(seed, hosts)``; pure and cached."""

    def __init__(
        self,
        hosts: int,
        seed: int = 1,
        *,
        domain: str = "sim.test",
        base: str = "127.100.0.0",
        addresses: int | None = None,
        mix: Mix | None = None,
        latency: Latency | None = None,
        http_port: int = 80,
        https_port: int = 443,
        big_records: int = 100,
        max_pages: int = MAX_PAGES,
        cache: int = 1 << 18,
    ) -> None:
        if hosts < 1:
            raise ValueError("hosts must be >= 1")
        self.hosts = hosts
        self.seed = seed
        self.domain = domain.strip(".").lower()
        self.base = int(ipaddress.IPv4Address(base))
        n_addr = addresses if addresses is not None else min(max(hosts // 10, 8), 4000)
        self.addresses = n_addr
        self.medium = max(1, int(n_addr * 0.3))
        self.tail = max(0, min(hosts, n_addr - BIG - self.medium))
        self.big_records = big_records
        if not 1 <= max_pages <= MAX_PAGES:
            raise ValueError(f"max_pages must be in 1..{MAX_PAGES}")
        self.max_pages = max_pages  # 1: one page a host (the memory run of many hosts)
        self.mix = mix or Mix()
        self.latency = latency or Latency()
        self.http_port = http_port
        self.https_port = https_port
        # slot = (i * step + offset) mod hosts is a bijection (step coprime to hosts); a step
        # near hosts/phi spreads the tail's one-host addresses evenly over the indexes
        step = max(1, int(hosts * 0.6180339887))
        while math.gcd(step, hosts) != 1:
            step += 1
        self._step, self._offset = step, _hash(seed, "tail") % hosts
        self._cache: dict[int, Host] = {}
        self._cache_max = cache
        self._name_re = re.compile(
            r"(?:(www)\.|c([1-9])-)?h(0|[1-9][0-9]*)\.(cdn\.)?" + re.escape(self.domain) + r"\Z"
        )

    # --- addresses ------------------------------------------------------------------------
    def address(self, k: int) -> str:
        return str(ipaddress.IPv4Address(self.base + 1 + k))  # base itself (x.y.0.0) unused

    def _tail_slot(self, i: int) -> int:
        return (i * self._step + self._offset) % self.hosts

    def address_dead(self, k: int) -> bool:
        """Tail addresses only: shared ones always listen."""
        first_tail = BIG + self.medium
        return (
            first_tail <= k < first_tail + self.tail
            and _hash(self.seed, "dead", k) / 2**64 < self.mix.dead
        )

    @cached_property
    def listening(self) -> list[str]:
        """Every IPv4 address a server must listen on (dead ones left out)."""
        count = BIG + self.medium + self.tail
        ks = [k for k in range(count) if not self.address_dead(k)]
        if self.mix.big_answer > 0:
            ks += range(count, count + self.big_records)
        return [self.address(k) for k in ks]

    # --- hosts ----------------------------------------------------------------------------
    def host(self, i: int) -> Host:
        """Host ``i`` (cached, bounded)."""
        got = self._cache.get(i)
        if got is None:
            if len(self._cache) >= self._cache_max:
                self._cache.clear()
            got = self._cache[i] = self._make(i)
        return got

    def _make(self, i: int) -> Host:
        rng = random.Random(_hash(self.seed, "host", i))
        mix, lat = self.mix, self.latency
        u = rng.random()
        dns = (
            "nxdomain"
            if u < mix.nxdomain
            else "servfail"
            if u < mix.nxdomain + mix.servfail
            else "silent"
            if u < mix.nxdomain + mix.servfail + mix.silent_dns
            else "ok"
        )
        ttl = rng.choice((30, 60, 300, 300, 3600, 3600, 86400))
        cname = rng.randint(1, CNAME_MAX) if rng.random() < mix.cname else 0
        family = "6" if rng.random() < mix.aaaa_only else "4"
        big = rng.random() < mix.big_answer
        slot = self._tail_slot(i)
        if slot < self.tail:
            k = BIG + self.medium + slot
        elif rng.random() < 0.5:
            k = rng.randrange(BIG)
        else:  # a Zipf-like spread over the medium pool: low numbers carry more names
            k = BIG + min(self.medium - 1, int(self.medium * rng.random() ** 2))
        first_big = BIG + self.medium + self.tail
        addrs = (
            tuple(self.address(first_big + j) for j in range(self.big_records))
            if big
            else (self.address(k),)
        )
        if family == "6":
            addrs = (IPV6_LOOPBACK,)
        dead = family == "4" and not big and self.address_dead(k)
        tarpit = rng.random() < mix.tarpit
        https = rng.random() < mix.https
        www = rng.random() < mix.www
        names, weights = zip(*mix.robots, strict=True)
        robots = rng.choices(names, weights)[0]
        pages = min(self.max_pages, int(rng.paretovariate(PAGES_ALPHA)))
        # drawn whatever the medians, so that latency does not change the rest of the web
        factors = [rng.lognormvariate(0, lat.sigma) for _ in range(3)]
        ttfb = lat.ttfb_ms / 1000 * factors[0]
        bandwidth = lat.bandwidth * factors[1]
        dns_delay = lat.dns_ms / 1000 * factors[2]
        name = f"h{i}.{self.domain}"
        return Host(
            i,
            name,
            ("www." + name) if www else name,
            dns,
            ttl,
            cname,
            family,
            addrs,
            dead,
            tarpit,
            https,
            www,
            robots,
            pages,
            ttfb,
            bandwidth,
            dns_delay,
            rng.getrandbits(32),
        )

    def parse_name(self, name: str) -> tuple[Host, str, int] | None:
        """``(host, kind, cname_step)`` for a name of the zone: kind is bare, www or cname."""
        m = self._name_re.match(name.rstrip(".").lower())
        if m is None:
            return None
        www, step, index, cdn = m.groups()
        i = int(index)
        if i >= self.hosts or bool(step) != bool(cdn):
            return None
        host = self.host(i)
        if www:
            return (host, "www", 0) if host.www else None
        if step:
            return (host, "cname", int(step)) if int(step) <= host.cname else None
        return host, "bare", 0

    def host_of(self, hostname: str) -> Host | None:
        """The host a Host header names (its bare or www name), or None."""
        parsed = self.parse_name(hostname)
        return None if parsed is None or parsed[1] == "cname" else parsed[0]

    # --- URLs -----------------------------------------------------------------------------
    def origin(self, scheme: str, name: str) -> str:
        port = self.https_port if scheme == "https" else self.http_port
        default = 443 if scheme == "https" else 80
        return f"{scheme}://{name}" + ("" if port == default else f":{port}")

    def url(self, host: Host, k: int = 0) -> str:
        """The canonical URL of page ``k`` of ``host``."""
        return self.origin(host.scheme, host.canonical) + page_path(k)

    def seed_url(self, host: Host) -> str:
        """What a seeds list names: plain http and the bare name (so redirects are exercised)."""
        return self.origin("http", host.name) + "/"

    def seeds(self, share: float = 1.0) -> list[str]:
        """Seed URLs: every host, or a seeded sample of ``share`` of them."""
        rng = random.Random(_hash(self.seed, "seeds"))
        return [
            self.seed_url(self.host(i))
            for i in range(self.hosts)
            if share >= 1 or rng.random() < share
        ]

    # --- what a server answers (pure: the web server and the truth both call these) ---------
    def route(self, scheme: str, hostname: str, path: str) -> Route:
        """The answer to ``GET scheme://hostname{path}``: a redirect, robots.txt, a page, a 404.

        http of an https host goes to https first (same name), then a bare name of a ``www``
        host to ``www.`` (same scheme): two hops, as many real sites do it.
        """
        host = self.host_of(hostname)
        if host is None or host.dns != "ok":
            return Route(404, None, None, -1)
        if host.https and scheme == "http":
            return Route(301, self.origin("https", hostname) + path, host, -1)
        if host.www and hostname == host.name:
            return Route(301, self.origin(scheme, host.canonical) + path, host, -1)
        if path == "/robots.txt":
            return Route(ROBOTS_STATUS[host.robots], None, host, ROBOTS)
        k = page_index(path)
        if k is None or k >= host.pages:
            return Route(404, None, host, -1)
        return Route(200, None, host, k)

    def page_links(self, host: Host, k: int) -> list[str]:
        """The absolute URLs page ``k`` of ``host`` links to (in page order, duplicates kept)."""
        r = random.Random(host.links_seed * 7919 + k).random
        own = self.url(host)[:-1]  # the canonical origin, without the trailing /
        children = range(FANOUT * k + 1, min(host.pages, FANOUT * k + FANOUT + 1))
        links = [own + page_path(c) for c in children]
        if k:
            links.append(own + "/")
        if host.pages > 1:
            links += [own + page_path(int(r() * host.pages)) for _ in range(2)]
        if r() < 0.05:
            links.append(own + f"/missing{k}.html")  # a broken link: 404
        for _ in range(1 + int(r() * 4)):
            other = self.host(int(r() * self.hosts))
            target = int(r() * other.pages) if r() < 0.2 else 0
            if r() < 0.15:  # written as users type it: plain http, bare name
                links.append(self.origin("http", other.name) + page_path(target))
            else:
                links.append(self.url(other, target))
        return links

    def params(self) -> dict[str, object]:
        """What rebuilds this generator in another process (``from_params``)."""
        return {
            "hosts": self.hosts,
            "seed": self.seed,
            "domain": self.domain,
            "base": str(ipaddress.IPv4Address(self.base)),
            "addresses": self.addresses,
            "mix": asdict(self.mix),
            "latency": asdict(self.latency),
            "http_port": self.http_port,
            "https_port": self.https_port,
            "big_records": self.big_records,
            "max_pages": self.max_pages,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Internet:
        p = dict(params)
        mix, latency = dict(p.pop("mix")), p.pop("latency")
        mix["robots"] = tuple(tuple(x) for x in mix["robots"])
        return cls(**p, mix=Mix(**mix), latency=Latency(**latency))


ROBOTS = -2  # Route.page for /robots.txt


class Route(NamedTuple):
    """A server's answer: status, Location (redirects), the host, page number or ROBOTS or -1."""

    status: int
    location: str | None
    host: Host | None
    page: int
