"""Client CPU of an HTTPS request over two transports, in one process on the asyncio reactor.

``python -m benchmarks.bench_transport [--plain] [--connections 2000] [--requests 1,4]``:
a local HTTPS server (another process: the simulated internet's test CA, the standard
library's ``ssl``, keep-alive, a 20 KB answer) and, in this process, the same work over

- ``twisted``: Twisted's TCP and TLS layers over pyOpenSSL (``connectTCP`` of a
  ``TLSMemoryBIOFactory`` with ``optionsForClientTLS``: the chain and the host name checked),
  as ``lean/http1*.py`` connects today;
- ``asyncio``: asyncio's own transport with the standard library's ``ssl`` (the chain and the
  host name checked by OpenSSL), on the same event loop;
- ``lean``: Twisted's TLS layer over pyOpenSSL, as ``twisted``, on asyncio's TCP transport
  (``lean/http1tcp.py``'s ``connect_tcp``), as ``lean/http1*.py`` connects since it was written.

Each connection has its own name (``h{i}.bench.test``, a new TLS session each: no resumption)
and sends ``--requests`` GETs one after another; ``--concurrency`` connections at once;
``--plain``: http, no TLS on either side; ``--loop uvloop.Loop``: the client's event loop, as
Scrapy's ``ASYNCIO_EVENT_LOOP`` names it. The two alternate, ``--reps`` times each (``--stacks``
names one alone, for ``perf record``); one JSON document: the client's CPU µs a request and a
connection, medians. What a rewrite of the client's transport could save, before it is
written: figures go to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DOMAIN = "bench.test"
BODY = b"x" * 20_000
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(BODY)


async def _serve(directory: Path, plain: bool) -> None:
    """Answer every request head with ``ANSWER`` + ``BODY``, keep-alive, until killed; print
    ``ready PORT`` once listening (a free port on loopback)."""
    from testweb.internet.tls import TestCA

    ca = TestCA(directory, DOMAIN)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(ANSWER + BODY)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    tls = None if plain else ca.default
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls, backlog=1024)
    print("ready", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


class _Exchange:
    """One connection's GETs, one after another: feed it bytes, it says what to write next."""

    def __init__(self, host: str, requests: int, done: asyncio.Future[None]) -> None:
        self.request = b"GET / HTTP/1.1\r\nHost: %b\r\nAccept: */*\r\n\r\n" % host.encode()
        self.left = requests
        self.need = len(ANSWER) + len(BODY)
        self.got = 0
        self.done = done

    def received(self, data: bytes) -> bool:
        """True when an answer is complete and another request is due."""
        self.got += len(data)
        if self.got < self.need:
            return False
        self.got -= self.need
        self.left -= 1
        return self.left > 0


async def _asyncio_run(port: int, ca: Path | None, n: int, requests: int, concurrency: int) -> None:
    loop = asyncio.get_running_loop()
    ctx = None if ca is None else ssl.create_default_context(cafile=str(ca))

    class Proto(asyncio.Protocol):
        def __init__(self, ex: _Exchange) -> None:
            self.ex = ex

        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            transport.write(self.ex.request)

        def data_received(self, data: bytes) -> None:
            if self.ex.received(data):
                self.transport.write(self.ex.request)
            elif self.ex.left == 0:
                self.transport.close()

        def connection_lost(self, exc: BaseException | None) -> None:
            if not self.ex.done.done():
                self.ex.done.set_result(None)

    async def one(i: int) -> None:
        done: asyncio.Future[None] = loop.create_future()
        ex = _Exchange(_host(i), requests, done)
        name = None if ctx is None else _host(i)
        await loop.create_connection(
            lambda: Proto(ex), "127.0.0.1", port, ssl=ctx, server_hostname=name
        )
        await done
        if ex.left:
            raise RuntimeError(f"asyncio: connection {i} ended early")

    await _bounded(n, concurrency, one)


def _host(i: int) -> str:
    """Connection ``i``'s name: its own TLS session (no resumption across names)."""
    return f"h{i}.{DOMAIN}"


async def _lean_run(port: int, ca: Path | None, n: int, requests: int, concurrency: int) -> None:
    await _twisted_run(port, ca, n, requests, concurrency, lean=True)


async def _twisted_run(
    port: int, ca: Path | None, n: int, requests: int, concurrency: int, *, lean: bool = False
) -> None:
    from twisted.internet import protocol, reactor
    from twisted.internet.ssl import Certificate, optionsForClientTLS
    from twisted.protocols.tls import TLSMemoryBIOFactory

    from larbinscrapy.lean.http1tcp import connect_tcp

    loop = asyncio.get_running_loop()
    trust = None if ca is None else Certificate.loadPEM(ca.read_bytes())

    class Proto(protocol.Protocol):
        def __init__(self, ex: _Exchange) -> None:
            self.ex = ex

        def connectionMade(self) -> None:
            self.transport.write(self.ex.request)  # type: ignore[union-attr]

        def dataReceived(self, data: bytes) -> None:
            if self.ex.received(data):
                self.transport.write(self.ex.request)  # type: ignore[union-attr]
            elif self.ex.left == 0:
                self.transport.loseConnection()  # type: ignore[union-attr]

        def connectionLost(self, reason: Any = None) -> None:
            if not self.ex.done.done():
                self.ex.done.set_result(None)

    class Factory(protocol.ClientFactory):
        def __init__(self, ex: _Exchange) -> None:
            self.ex = ex

        def buildProtocol(self, addr: Any) -> Proto:
            return Proto(self.ex)

        def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
            self.ex.done.set_exception(reason.value)

    async def one(i: int) -> None:
        done: asyncio.Future[None] = loop.create_future()
        ex = _Exchange(_host(i), requests, done)
        factory: Any = Factory(ex)
        if trust is not None:  # as the lean handler connects: TLS over connectTCP
            factory = TLSMemoryBIOFactory(optionsForClientTLS(_host(i), trust), True, factory)
        if lean:
            connect_tcp(reactor, "127.0.0.1", port, factory, 30)  # type: ignore[arg-type]
        else:
            reactor.connectTCP("127.0.0.1", port, factory)  # type: ignore[attr-defined]
        await done
        if ex.left:
            raise RuntimeError(f"twisted: connection {i} ended early")

    await _bounded(n, concurrency, one)


async def _bounded(n: int, concurrency: int, one: Any) -> None:
    """``one(i)`` for i in range(n), ``concurrency`` at a time."""
    todo = iter(range(n))

    async def worker() -> None:
        for i in todo:
            await one(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


def _client(args: argparse.Namespace, port: int, ca: Path | None) -> dict[str, Any]:
    from scrapy.utils.reactor import install_reactor

    try:
        install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor", args.loop)
    except (ImportError, NameError, ValueError) as exc:
        raise SystemExit(f"--loop {args.loop}: cannot be loaded ({exc})") from None
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    stacks: dict[str, Any] = {"twisted": _twisted_run, "asyncio": _asyncio_run, "lean": _lean_run}
    runs = {name: stacks[name] for name in args.stacks}
    out: dict[str, Any] = {}

    async def main() -> None:
        for requests in args.requests:
            cpu: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.reps):
                for name, run in runs.items():
                    start = time.process_time()
                    await run(port, ca, args.connections, requests, args.concurrency)
                    cpu[name].append(time.process_time() - start)
            for name, values in cpu.items():
                median = statistics.median(values)
                out[f"{name}, {requests} a connection"] = {
                    "cpu_s": [round(v, 3) for v in values],
                    "us_a_request": round(median * 1e6 / (args.connections * requests), 1),
                    "us_a_connection": round(median * 1e6 / args.connections, 1),
                }

    def start() -> None:
        d = Deferred.fromFuture(asyncio.ensure_future(main()))
        d.addErrback(lambda f: out.setdefault("error", f.getTraceback()))
        d.addBoth(lambda _: reactor.stop())  # type: ignore[attr-defined]

    reactor.callWhenRunning(start)  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--connections", type=int, default=2000)
    p.add_argument("--requests", default="1,4", help="GETs a connection, comma-separated")
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--stacks", default="twisted,lean,asyncio", help="comma-separated; one for perf")
    p.add_argument("--plain", action="store_true", help="http: no TLS on either side")
    p.add_argument("--loop", help="the asyncio event loop class, as ASYNCIO_EVENT_LOOP names it")
    p.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        asyncio.run(_serve(Path(args.serve), args.plain))
        return 0
    args.requests = [int(r) for r in args.requests.split(",")]
    args.stacks = args.stacks.split(",")
    if unknown := set(args.stacks) - {"twisted", "lean", "asyncio"}:
        raise SystemExit(
            f"--stacks: unknown: {', '.join(sorted(unknown))} (twisted, lean, asyncio)"
        )
    with tempfile.TemporaryDirectory(prefix="bench-transport-") as tmp:
        cmd = [sys.executable, "-m", "benchmarks.bench_transport", "--serve", tmp]
        cmd += ["--plain"] if args.plain else []
        server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None
            ready, _, port = server.stdout.readline().partition(" ")
            if ready != "ready":
                raise SystemExit("the HTTPS server did not start")
            result = _client(args, int(port), None if args.plain else Path(tmp) / "ca.pem")
        finally:
            server.kill()
            server.wait()
    print(json.dumps(result, indent=1))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
