"""``python -m testweb.internet --hosts 100000 --seed S``: serve a simulated internet.

Starts the DNS server (``--dns``, port 53 by default: run it inside a network namespace, see
``netns.py``) and the web server (http on ``--http-port``, https with a fresh test CA on
``--https-port``) on one asyncio loop, writes ``LOGDIR/internet.json`` (the generator's
parameters, the DNS address, the CA file, the ports) and prints it as one JSON line once
everything listens; then serves until SIGTERM or SIGINT, and flushes the logs
(``LOGDIR/web.log``, ``LOGDIR/dns.log``). ``--write-seeds PATH`` writes a seeds file (one URL a
line); with ``--no-serve`` it only writes it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from testweb.internet.dns import DnsServer, dns_address
from testweb.internet.model import MAX_PAGES, SOURCE_VERSION, Internet, Latency, Mix
from testweb.internet.tls import TestCA
from testweb.internet.web import WebServer

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m testweb.internet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--base", default="127.100.0.0", help="first address of the /14 used")
    p.add_argument(
        "--domain",
        default="sim.test",
        help="two labels at least (a wildcard certificate needs them)",
    )
    p.add_argument(
        "--addresses",
        type=int,
        default=None,
        help="listening IPv4 addresses (default: hosts/10, 8..4000)",
    )
    p.add_argument("--dns", default=None, help="DNS address (default: base's x.(b+3).255.53)")
    p.add_argument("--dns-port", type=int, default=53)
    p.add_argument("--http-port", type=int, default=80)
    p.add_argument("--https-port", type=int, default=443)
    p.add_argument("--no-dns", action="store_true")
    p.add_argument("--no-web", action="store_true")
    p.add_argument("--no-ipv6", action="store_true", help="do not listen on ::1")
    p.add_argument("--dns-ms", type=float, default=0.0, help="median DNS answer delay")
    p.add_argument("--ttfb-ms", type=float, default=0.0, help="median time to first byte")
    p.add_argument("--bandwidth", type=float, default=0.0, help="median bytes/s a host (0: any)")
    p.add_argument(
        "--no-failures",
        action="store_true",
        help="every host answers: no DNS failures, dead or silent hosts, http only",
    )
    p.add_argument(
        "--max-pages", type=int, default=MAX_PAGES, help="pages a host at most (1: one each)"
    )
    p.add_argument("--https", type=float, default=None, help="share of https hosts")
    p.add_argument("--tarpit", type=float, default=None, help="share of hosts never answering")
    p.add_argument("--logdir", default=None)
    p.add_argument("--write-seeds", default=None, metavar="PATH")
    p.add_argument("--seed-share", type=float, default=1.0, help="share of hosts in the seeds")
    p.add_argument("--no-serve", action="store_true", help="write --write-seeds and exit")
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> Internet:
    mix = Mix.none() if args.no_failures else Mix()
    changes = {k: v for k, v in (("https", args.https), ("tarpit", args.tarpit)) if v is not None}
    if changes:
        mix = Mix(**{**mix.__dict__, **changes})
    return Internet(
        args.hosts,
        args.seed,
        domain=args.domain,
        base=args.base,
        addresses=args.addresses,
        mix=mix,
        latency=Latency(dns_ms=args.dns_ms, ttfb_ms=args.ttfb_ms, bandwidth=args.bandwidth),
        http_port=args.http_port,
        https_port=args.https_port,
        max_pages=args.max_pages,
    )


async def serve(args: argparse.Namespace, internet: Internet, logdir: Path) -> None:
    """Start what was asked, publish ``internet.json``, wait for a signal, stop."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    info: dict[str, Any] = {"logdir": str(logdir), "pid": os.getpid()}
    dns = web = None
    if not args.no_dns:
        dns = DnsServer(
            internet, args.dns or dns_address(args.base), args.dns_port, log=str(logdir / "dns.log")
        )
        info["dns"] = list(await dns.start())
    if not args.no_web:
        ca = TestCA(logdir / "tls", internet.domain)
        info["ca"] = str(ca.ca_path)
        web = WebServer(
            internet, tls=ca.default, log=str(logdir / "web.log"), ipv6=not args.no_ipv6
        )
        await web.start()
        info["listening"] = len(internet.listening)
    info["params"] = internet.params()
    info["source"] = SOURCE_VERSION
    text = json.dumps(info)
    tmp = logdir / "internet.json.tmp"
    tmp.write_text(text)
    tmp.replace(logdir / "internet.json")
    print(text, flush=True)
    await stop.wait()
    if web is not None:
        web.close()
    if dns is not None:
        dns.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    internet = build(args)
    if args.write_seeds:
        Path(args.write_seeds).write_text("\n".join(internet.seeds(args.seed_share)) + "\n")
    if args.no_serve:
        return 0
    logdir = Path(args.logdir or tempfile.mkdtemp(prefix="internet-"))
    logdir.mkdir(parents=True, exist_ok=True)
    asyncio.run(serve(args, internet, logdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
