"""``python -m testweb.manyhosts``: a cheap web of many hosts (10^3-10^6) on loopback.

For the scale tests and ``benchmarks/bench_hosts.py`` (#35, points 3 and 4): no file per host,
every answer made from the host's number. Host ``n`` (0-based) is named ``h<n>.scale.test`` and
lives on address ``--first-ip`` + ``n // --hosts-per-ip``; every address listens on one port.
Names are pinned with ``LARBIN_RESOLVE`` (``resolve_map``), or, with ``--dns ADDRESS``, looked
up: the server answers A queries for them on ``ADDRESS`` port 53 (run it and the crawl inside a
network namespace whose resolv.conf names that address: ``served(..., netns=...)``), so a crawl
of 10^6 hosts holds no pinned map of 10^6 names and goes through its resolver. A host has
``--pages`` pages: ``/`` and ``/p<i>.html``; page ``i`` links to page ``i + 1`` (so every page
is reachable from the start page), to two other pages of its host and to ``--cross`` start pages
of other hosts. robots.txt allows all but ``/private/`` (never linked). The ground truth is every
page of every host.

HTTP/1.1 with keep-alive: a connection idle for ``--keepalive`` seconds is closed (Apache's
default is 5 s), as a real server does. Every request is logged as ``t conn host path`` (one
line, space separated; ``conn`` numbers the server's connections) to ``--log``, flushed each
second and at SIGTERM. Prints ``{"port": N}`` on stdout (and to ``--info``) once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import random
import signal
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from testweb.internet.netns import Namespace

DOMAIN = "scale.test"
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


def host_name(n: int) -> str:
    return f"h{n}.{DOMAIN}"


def host_number(name: str) -> int:
    """The number of ``h<n>.scale.test``; -1 for any other name."""
    head, _, rest = name.partition(".")
    if rest != DOMAIN or not head[1:].isdigit():
        return -1
    return int(head[1:])


def ip_of(n: int, first_ip: str, hosts_per_ip: int) -> str:
    return str(ipaddress.ip_address(first_ip) + n // hosts_per_ip)


def ips(hosts: int, first_ip: str, hosts_per_ip: int) -> list[str]:
    return [ip_of(n, first_ip, hosts_per_ip) for n in range(0, hosts, hosts_per_ip)]


def resolve_map(hosts: int, first_ip: str, hosts_per_ip: int) -> dict[str, str]:
    """Name -> address for ``LARBIN_RESOLVE``."""
    return {host_name(n): ip_of(n, first_ip, hosts_per_ip) for n in range(hosts)}


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p{i}.html"


def ground_truth(hosts: int, pages: int, port: int) -> set[str]:
    return {
        f"http://{host_name(n)}:{port}{page_path(i)}" for n in range(hosts) for i in range(pages)
    }


def page_links(n: int, i: int, *, hosts: int, pages: int, cross: int, seed: int) -> list[str]:
    """The links of page ``i`` of host ``n`` (paths on the host, or ``//name/`` elsewhere)."""
    rng = random.Random(seed * 1_000_003 + n * 1009 + i)
    links = [page_path(i + 1)] if i + 1 < pages else []
    links += [page_path(rng.randrange(pages)) for _ in range(2)]
    links += [f"//{host_name(rng.randrange(hosts))}/" for _ in range(cross)]
    return links


class Web:
    """What the server answers (module docstring)."""

    def __init__(self, hosts: int, pages: int, cross: int, seed: int, port: int = 0) -> None:
        self.hosts, self.pages, self.cross, self.seed, self.port = hosts, pages, cross, seed, port

    def answer(self, host: str, path: str) -> tuple[int, bytes, str]:
        n = host_number(host.rsplit(":", 1)[0] if not host.startswith("[") else host)
        if n < 0 or n >= self.hosts:
            return 404, b"no such host\n", "text/plain"
        if path == "/robots.txt":
            return 200, ROBOTS, "text/plain"
        i = 0 if path == "/" else _page_index(path)
        if i < 0 or i >= self.pages:
            return 404, b"not found\n", "text/plain"
        hrefs = page_links(
            n, i, hosts=self.hosts, pages=self.pages, cross=self.cross, seed=self.seed
        )
        body = "".join(
            f'<a href="http:{h[:-1]}:{self.port}/">x</a>\n'
            if h.startswith("//")
            else f'<a href="{h}">page</a>\n'
            for h in hrefs
        )
        html = f"<html><head><title>{host} {i}</title></head><body>\n{body}</body></html>\n"
        return 200, html.encode(), "text/html"


def _page_index(path: str) -> int:
    if path.startswith("/p") and path.endswith(".html") and path[2:-5].isdigit():
        return int(path[2:-5])
    return -1


class HttpConnection(asyncio.Protocol):
    """One keep-alive connection: requests without a body, answered in order."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.transport: Any = None
        self.idle: asyncio.TimerHandle | None = None
        self.conn = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.server.connections += 1
        self.conn = self.server.connections
        self._arm()

    def _arm(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        self.idle = asyncio.get_running_loop().call_later(self.server.keepalive, self._expire)

    def _expire(self) -> None:
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.idle is not None:
            self.idle.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            self._answer(head.decode("latin-1").split("\r\n"))
        self._arm()

    def _answer(self, lines: list[str]) -> None:
        parts = lines[0].split(" ")
        path = parts[1] if len(parts) > 1 else "/"
        host, close = "", False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "host":
                host = value.strip().lower()
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        status, body, ctype = self.server.web.answer(host, path.split("?", 1)[0])
        self.server.log(self.conn, host.rsplit(":", 1)[0], path)
        keep = f"Keep-Alive: timeout={int(self.server.keepalive)}"
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            f"{'Connection: close' if close else keep}\r\n\r\n"
        )
        if self.server.latency > 0:  # before the first byte, as a distant server
            asyncio.get_running_loop().call_later(
                self.server.latency, self._send, head.encode() + body, close
            )
        else:
            self._send(head.encode() + body, close)

    def _send(self, data: bytes, close: bool) -> None:
        self.transport.write(data)
        if close:
            self.transport.close()


class Server:
    """Listens on every address of the web; logs each request."""

    def __init__(self, web: Web, keepalive: float, log: IO[str], latency: float = 0.0) -> None:
        self.web = web
        self.keepalive = keepalive
        self.latency = latency
        self.connections = 0
        self._log = log

    def log(self, conn: int, host: str, path: str) -> None:
        self._log.write(f"{time.time():.4f} {conn} {host} {path}\n")

    async def listen(self, addresses: list[str], port: int) -> int:
        loop = asyncio.get_running_loop()
        for ip in addresses:
            srv = await loop.create_server(lambda: HttpConnection(self), ip, port, backlog=512)
            if not port:
                port = srv.sockets[0].getsockname()[1]
        return port


def read_log(path: Path) -> list[tuple[float, int, str, str]]:
    """The log's complete lines: (time, connection, host, path)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.endswith("\n"):
            t, conn, host, p = line.split(" ", 3)
            out.append((float(t), int(conn), host, p.rstrip("\n")))
    return out


def summary(records: list[tuple[float, int, str, str]], port: int) -> dict[str, Any]:
    """Pages fetched (set), pages fetched twice, connections per host (average)."""
    pages: Counter[str] = Counter()
    conns: dict[str, set[int]] = defaultdict(set)
    for _, conn, host, path in records:
        conns[host].add(conn)
        if path not in ("/robots.txt", "/sitemap.xml"):  # per-site requests, not pages
            pages[f"http://{host}:{port}{path}"] += 1
    per_host = sum(len(c) for c in conns.values()) / max(1, len(conns))
    return {
        "pages": set(pages),
        "twice": sum(1 for c in pages.values() if c > 1),
        "connections_per_host": per_host,
    }


DNS_TTL = 3600


class NameServer(asyncio.DatagramProtocol):
    """A queries for ``h<n>.scale.test`` answered with the host's address (TTL ``DNS_TTL``); an
    unknown name NXDOMAIN, another type an empty answer. UDP only: the answers are small."""

    def __init__(self, hosts: int, first_ip: str, hosts_per_ip: int) -> None:
        self.hosts, self.first_ip, self.hosts_per_ip = hosts, first_ip, hosts_per_ip
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        from dnslib import QTYPE, RCODE, RR, A, DNSError, DNSRecord

        try:
            query = DNSRecord.parse(data)
        except DNSError:
            return
        reply = query.reply()
        n = host_number(str(query.q.qname).rstrip(".").lower())
        if not 0 <= n < self.hosts:
            reply.header.rcode = RCODE.NXDOMAIN
        elif query.q.qtype == QTYPE.A:
            address = ip_of(n, self.first_ip, self.hosts_per_ip)
            reply.add_answer(RR(query.q.qname, QTYPE.A, rdata=A(address), ttl=DNS_TTL))
        if self.transport is not None:
            self.transport.sendto(reply.pack(), addr)


async def serve(args: argparse.Namespace) -> None:
    web = Web(args.hosts, args.pages, args.cross, args.seed)
    with open(args.log, "w", encoding="utf-8", buffering=1 << 16) as log:
        server = Server(web, args.keepalive, log, args.latency)
        web.port = await server.listen(ips(args.hosts, args.first_ip, args.hosts_per_ip), args.port)
        if args.dns:
            await asyncio.get_running_loop().create_datagram_endpoint(
                lambda: NameServer(args.hosts, args.first_ip, args.hosts_per_ip),
                local_addr=(args.dns, 53),
            )
        info = json.dumps({"port": web.port})
        if args.info:
            Path(args.info + ".tmp").write_text(info, encoding="utf-8")
            Path(args.info + ".tmp").rename(args.info)
        sys.stdout.write(info + "\n")
        sys.stdout.flush()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            log.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testweb.manyhosts", description=__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=5, help="pages a host")
    parser.add_argument("--cross", type=int, default=2, help="links to other hosts a page")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hosts-per-ip", type=int, default=1)
    parser.add_argument(
        "--first-ip",
        default="127.25.0.1",
        help="the first address (the scale helper's range: 127.25-127.28)",
    )
    parser.add_argument("--keepalive", type=float, default=5.0, help="idle seconds a connection")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--log", required=True)
    parser.add_argument("--info", default="")
    parser.add_argument("--dns", default="", help="also answer the names' A queries here, port 53")
    asyncio.run(serve(parser.parse_args(argv)))


if __name__ == "__main__":
    main()


# -- running a crawl of it (tests and benchmarks) -----------------------------------------------
def write_crawl_files(
    directory: Path, hosts: int, first_ip: str, hosts_per_ip: int, port: int, pinned: bool = True
) -> tuple[Path, dict[str, str]]:
    """A seeds file (every start page) and a settings module pinning every name, in
    ``directory``; returns the seeds file and the environment (PYTHONPATH, the settings module)
    that a ``scrapy crawl larbin -a seeds=FILE`` needs. The names go through a module, not
    ``-s``: 10^4 names are more than one command-line argument may hold."""
    directory.mkdir(parents=True, exist_ok=True)
    seeds = directory / "seeds.txt"
    seeds.write_text(
        "".join(f"http://{host_name(n)}:{port}/\n" for n in range(hosts)), encoding="utf-8"
    )
    text = "import json, pathlib\nfrom settings.base import *  # noqa: F403\n"
    if pinned:  # else the names are looked up (``served(..., netns=...)``)
        (directory / "resolve.json").write_text(
            json.dumps(resolve_map(hosts, first_ip, hosts_per_ip)), encoding="utf-8"
        )
        text += (
            f"LARBIN_RESOLVE = json.loads(pathlib.Path({str(directory / 'resolve.json')!r})"
            ".read_text())\n"
        )
    (directory / "scale_settings.py").write_text(text, encoding="utf-8")
    root = str(Path(__file__).resolve().parent.parent)
    return seeds, {"PYTHONPATH": f"{root}:{directory}", "SCRAPY_SETTINGS_MODULE": "scale_settings"}


@contextlib.contextmanager
def served(
    workdir: Path,
    hosts: int,
    pages: int,
    first_ip: str,
    hosts_per_ip: int,
    netns: Namespace | None = None,
) -> Iterator[tuple[int, Path, dict[str, str]]]:
    """This web served from a subprocess (its files in ``workdir/web``), with the crawl's files
    in ``workdir/crawl``: (port, seeds file, environment). The server's log is flushed at exit:
    read it (``read_log(workdir / "web" / LOG)``) after the block. With ``netns`` the server
    runs inside that namespace and answers its names on the namespace's nameserver (the crawl
    must run there too: ``netns.command``), and the crawl's settings pin no name."""
    from testweb.harness import launch  # here: the harness is for tests, this module is a server

    proc, info, _ = launch(
        workdir / "web",
        [
            "testweb.manyhosts",
            "--hosts",
            str(hosts),
            "--pages",
            str(pages),
            "--first-ip",
            first_ip,
            "--hosts-per-ip",
            str(hosts_per_ip),
            *(["--dns", netns.nameserver] if netns else []),
        ],
        prefix=netns.command([]) if netns else None,
    )
    try:
        port = info["port"]
        seeds, env = write_crawl_files(
            workdir / "crawl", hosts, first_ip, hosts_per_ip, port, pinned=netns is None
        )
        yield port, seeds, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


LOG = "testweb-log.jsonl"  # the server's request log in its directory (``launch`` names it)


def crawl_command(seeds: Path, settings: dict[str, object]) -> list[str]:
    """``scrapy crawl larbin`` of ``seeds`` as the scale tests and benchmark run it: loopback
    allowed, no IP delay, no status page, INFO logs; then ``settings``."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", "larbin", "-a", f"seeds={seeds}"]
    base: dict[str, object] = {
        "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8",
        "LARBIN_IP_DELAY": 0,
        "LARBIN_STATUS_PORT": 0,
        "LOG_LEVEL": "INFO",
    }
    for key, value in {**base, **settings}.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd
