"""``python -m testweb.internet.analyze LOGDIR``: how a crawl did against the generator's truth.

Reads ``LOGDIR/web.log`` and ``LOGDIR/dns.log`` (``logs.py``) and ``--truth`` (the
``internet.json`` the server wrote: the generator's parameters and ports), walks the truth from
``--seeds`` (default ``LOGDIR/seeds.txt``, else every host) and prints one JSON document:
coverage of the URLs and hosts a correct crawl requests (and up to ten of the hosts, URLs
and robots.txt redirect targets it missed), URLs fetched twice, URLs fetched that
the truth leaves out, robots-disallowed URLs fetched, robots.txt redirects whose target was never
asked for, the smallest gaps between requests per host and per IP at the server (with
``--delay`` and ``--ip-delay``, how many gaps were shorter by more than ``--slack``), and DNS
queries per name and per live host.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import Counter
from pathlib import Path
from statistics import mean
from typing import Any
from urllib.parse import urlsplit

from testweb.harness import SITE_FILES, gaps_by_host, gaps_by_ip
from testweb.internet.logs import DnsEntry, WebEntry, read_dns, read_web
from testweb.internet.model import SOURCE_VERSION, Internet
from testweb.internet.truth import allowed, walk

logger = logging.getLogger(__name__)

ROBOTS = "/robots.txt"
EXAMPLES = 10  # names and URLs listed of each kind of miss


def url_of(internet: Internet, entry: WebEntry) -> str:
    scheme = "https" if entry.port == internet.https_port else "http"
    return internet.origin(scheme, entry.host) + entry.path


def analyze(
    internet: Internet,
    seeds: list[str],
    web: list[WebEntry],
    dns: list[DnsEntry],
    delay: float = 0.0,
    ip_delay: float | None = None,
    slack: float = 0.0,
) -> dict[str, Any]:
    """The report (a JSON-able dict). With ``delay`` (per host; ``ip_delay`` per IP, the same
    by default), the gaps at the server shorter than the delay less ``slack`` (the server's
    clock is its event loop's, late by a few ms under load) are counted."""
    truth = walk(internet, seeds)
    fetches = Counter(url_of(internet, e) for e in web if e.path not in SITE_FILES)
    fetched = set(fetches)
    hosts_hit = {h.index for h in map(internet.host_of, (e.host for e in web)) if h is not None}
    disallowed = 0
    for url in fetched:
        parts = urlsplit(url)
        host = internet.host_of(parts.hostname or "")
        if host is not None and not allowed(host, parts.path or "/"):
            disallowed += 1
    robots = Counter((e.port, e.host) for e in web if e.path == ROBOTS)
    unfollowed = _robots_moves_unfollowed(internet, web)
    missed_hosts = sorted(truth.hosts - hosts_hit)
    report: dict[str, Any] = {
        "seeds": len(seeds),
        "truth_urls": len(truth.requested),
        "truth_hosts": len(truth.hosts),
        "fetched_urls": len(fetched),
        "coverage": _ratio(len(fetched & truth.requested), len(truth.requested)),
        "host_coverage": _ratio(len(hosts_hit & truth.hosts), len(truth.hosts)),
        "hosts_missed": len(missed_hosts),
        # a few of what was missed, to look up in the crawl's log (the whole sets can be large)
        "hosts_missed_some": [internet.host(i).name for i in missed_hosts[:EXAMPLES]],
        "urls_missed_some": sorted(truth.requested - fetched)[:EXAMPLES],
        "fetched_twice": sum(1 for n in fetches.values() if n > 1),
        "fetched_outside_truth": len(fetched - truth.requested),
        "disallowed_fetched": disallowed,
        "robots_fetches_max_per_site": max(robots.values(), default=0),
        "robots_moves_unfollowed": len(unfollowed),
        "robots_moves_unfollowed_some": sorted(unfollowed)[:EXAMPLES],
        "requests": len(web),
    }
    report.update(_gaps(web, delay, delay if ip_delay is None else ip_delay, slack))
    report.update(_dns(internet, truth.hosts, dns))
    return report


def _robots_moves_unfollowed(internet: Internet, web: list[WebEntry]) -> set[str]:
    """robots.txt redirects whose target the crawl never asked for: the site's rules came from
    no answer (a crawl that knew the target's file already asked for it once)."""
    asked = {url_of(internet, e) for e in web if e.path == ROBOTS}
    targets: set[str] = set()
    for e in web:
        if e.path == ROBOTS and 300 <= e.status < 400:
            scheme = "https" if e.port == internet.https_port else "http"
            location = internet.route(scheme, e.host, ROBOTS).location
            if location is not None:
                targets.add(location)
    return targets - asked


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 1.0


def _gaps(web: list[WebEntry], delay: float, ip_delay: float, slack: float) -> dict[str, Any]:
    records = [{"t": e.t, "ip": e.ip, "host": e.host} for e in web]
    out: dict[str, Any] = {}
    for kind, gaps, least in (
        ("host", gaps_by_host(records), delay),
        ("ip", gaps_by_ip(records), ip_delay),
    ):
        flat = [g for gs in gaps.values() for g in gs]
        out[f"min_gap_per_{kind}"] = round(min(flat), 4) if flat else None
        if least:
            out[f"gaps_below_delay_per_{kind}"] = sum(1 for g in flat if g < least - slack)
    return out


def _dns(internet: Internet, live: set[int], dns: list[DnsEntry]) -> dict[str, Any]:
    per_name = Counter(e.name for e in dns)
    per_host: Counter[int] = Counter()
    for name, n in per_name.items():
        parsed = internet.parse_name(name)
        if parsed is not None:
            per_host[parsed[0].index] += n
    asked = [per_host[i] for i in live]
    return {
        "dns_queries": len(dns),
        "dns_names": len(per_name),
        "dns_queries_per_name_max": max(per_name.values(), default=0),
        "dns_queries_per_live_host": round(mean(asked), 3) if asked else 0.0,
        "dns_live_hosts_never_asked": sum(1 for n in asked if n == 0),
        "dns_tcp": sum(1 for e in dns if e.proto == "tcp"),
        "dns_truncated": sum(1 for e in dns if e.answer == "TC"),
    }


def load(
    logdir: Path, truth: Path | None = None, seeds: Path | None = None
) -> tuple[Internet, list[str], list[WebEntry], list[DnsEntry]]:
    """The generator, the seeds and both logs of a run."""
    info = json.loads((truth or logdir / "internet.json").read_text())
    if info.get("source", SOURCE_VERSION) != SOURCE_VERSION:
        logger.warning(
            "the server ran another version of testweb/internet/model.py: the truth "
            "computed here may not be the web it served"
        )
    internet = Internet.from_params(info["params"])
    seeds_path = seeds or logdir / "seeds.txt"
    seed_urls = (
        [s.strip() for s in seeds_path.read_text().splitlines() if s.strip()]
        if seeds_path.exists()
        else internet.seeds()
    )
    web = read_web(str(logdir / "web.log")) if (logdir / "web.log").exists() else []
    dns = read_dns(str(logdir / "dns.log")) if (logdir / "dns.log").exists() else []
    return internet, seed_urls, web, dns


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m testweb.internet.analyze", description=__doc__)
    p.add_argument("logdir", type=Path)
    p.add_argument("--truth", type=Path, default=None, help="internet.json (default: LOGDIR's)")
    p.add_argument("--seeds", type=Path, default=None, help="seeds file (default: LOGDIR's)")
    p.add_argument("--delay", type=float, default=0.0, help="count gaps shorter than this")
    p.add_argument("--ip-delay", type=float, default=None, help="per IP (default: --delay)")
    p.add_argument("--slack", type=float, default=0.0, help="seconds of the server clock's noise")
    args = p.parse_args(argv)
    internet, seeds, web, dns = load(args.logdir, args.truth, args.seeds)
    report = analyze(internet, seeds, web, dns, args.delay, args.ip_delay, args.slack)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
