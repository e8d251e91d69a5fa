"""``python -m testweb.rawweb``: a raw-socket HTTP server whose answers are scripted per path.

For the failure tests: what an HTTP library would refuse to send (a connection reset in the
middle of a body, a 1 MB header line, bytes that are not HTTP, a server that accepts and never
answers) is written straight to the socket. Every path is one entry of the ``--pages`` JSON
file, ``{"/path": {...}}``:

* ``{"links": [url, ...]}``: 200, an HTML page with those links;
* ``{"redirect": url, "status": 302}``: a redirect to ``url``;
* ``{"status": 503, "body": text}``: that status and body (text/plain);
* ``{"behaviour": "tarpit" | "reset" | "bigheader" | "garbage" | "close"}``: accept and never
  answer; headers and half the body, then a TCP reset; a 1 MB header line; a line of non-HTTP
  bytes; read the request and close the connection without a byte of answer.

``{port}`` in a URL or a body stands for the port the server listens on (known only once it
listens).
An entry keyed ``//host/path`` answers that path on that hostname only (before ``/path``).

Any other path answers 404 (``/robots.txt`` included, which means "everything allowed").
Listens on every ``--ip`` (loopback addresses) at one port (``--port``, 0 for any free one),
prints ``{"port": N}`` once it listens, and appends one JSON line per request to ``--log``:
``{"t", "ip", "port", "host", "path"}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from html import escape
from pathlib import Path
from typing import Any

from twisted.internet import protocol

BIG_HEADER = 1024 * 1024


class ScriptedHttp(protocol.Protocol):
    """One connection: read a request head, answer it as its path's entry says, close."""

    def __init__(self, factory: ScriptedFactory) -> None:
        self.factory = factory
        self.buffer = b""
        self.answered = False

    def dataReceived(self, data: bytes) -> None:
        if self.answered:
            return
        self.buffer += data
        if b"\r\n\r\n" not in self.buffer:
            return
        self.answered = True
        head = self.buffer.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = head[0].split(" ")
        path = parts[1] if len(parts) > 1 else "/"
        host = ""
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "host":
                host = value.strip().rsplit(":", 1)[0]
        local = self.transport.getHost()
        self.factory.log(
            {"t": time.time(), "ip": local.host, "port": local.port, "host": host, "path": path}
        )
        pages, bare = self.factory.pages, path.split("?", 1)[0]
        self.answer(path, pages.get(f"//{host}{bare}") or pages.get(bare) or {})

    def answer(self, path: str, page: dict[str, Any]) -> None:
        behaviour = page.get("behaviour")
        if behaviour == "tarpit":
            return  # keep the connection open, say nothing
        if behaviour == "reset":
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                b"Content-Length: 10000\r\n\r\n" + b"<html>" + b"x" * 4000
            )
            self.factory.reactor.callLater(0.05, self.transport.abortConnection)
            return
        if behaviour == "bigheader":
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nX-Big: "
                + b"a" * BIG_HEADER
                + b"\r\nContent-Length: 2\r\n\r\nok"
            )
            self.transport.loseConnection()
            return
        if behaviour == "close":
            self.transport.loseConnection()
            return
        if behaviour == "garbage":
            self.transport.write(b"\x00\x01 this is not HTTP at all \xff\r\n\r\n")
            self.transport.loseConnection()
            return
        port = str(self.factory.port)
        if "redirect" in page:
            status = int(page.get("status", 302))
            self.send(status, b"", [("Location", page["redirect"].replace("{port}", port))])
            return
        if "links" in page:
            body = "".join(
                f'<a href="{escape(u.replace("{port}", port))}">{i}</a>\n'
                for i, u in enumerate(page["links"])
            )
            title = f"<title>{escape(path)}</title>"  # distinct bodies: no content duplicates
            self.send(
                200,
                f"<html><head>{title}</head><body>{body}</body></html>".encode(),
                [("Content-Type", "text/html")],
            )
            return
        if "body" in page:
            self.send(
                int(page.get("status", 200)),
                page["body"].replace("{port}", port).encode(),
                [("Content-Type", "text/plain")],
            )
            return
        self.send(404, b"not found", [("Content-Type", "text/plain")])

    def send(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers]
        self.transport.write("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
        self.transport.loseConnection()


class ScriptedFactory(protocol.Factory):
    """Builds the protocol that answers each connection as ``pages`` scripts its path."""

    def __init__(self, pages: dict[str, Any], log_path: str | None, reactor: Any) -> None:
        self.pages = pages
        self.reactor = reactor
        self.port = 0
        self._log = open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115

    def buildProtocol(self, addr: Any) -> ScriptedHttp:
        return ScriptedHttp(self)

    def log(self, entry: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.write(json.dumps(entry) + "\n")
            self._log.flush()


class RawWeb:
    """A running ``testweb.rawweb`` subprocess: its port, hostname map and request log."""

    def __init__(self, tmp: Path, pages: dict[str, Any], hosts: dict[str, str]) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.hosts = hosts
        self.log_path = tmp / "rawweb-log.jsonl"
        pages_path = tmp / "rawweb-pages.json"
        pages_path.write_text(json.dumps(pages), encoding="utf-8")
        cmd = [
            sys.executable,
            "-m",
            "testweb.rawweb",
            "--pages",
            str(pages_path),
            "--log",
            str(self.log_path),
        ]
        for ip in dict.fromkeys(hosts.values()):
            cmd += ["--ip", ip]
        root = str(Path(__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": root}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.proc.wait()
            raise RuntimeError(f"testweb.rawweb did not start (exit {self.proc.returncode})")
        self.port: int = json.loads(line)["port"]

    @property
    def resolve(self) -> dict[str, str]:
        return dict(self.hosts)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines(keepends=True)
        return [json.loads(line) for line in lines if line.endswith("\n")]

    def __enter__(self) -> RawWeb:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testweb.rawweb", description=__doc__)
    parser.add_argument("--ip", action="append", required=True, help="a loopback IP (repeatable)")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--pages", required=True, help="JSON file: path -> what to answer")
    parser.add_argument("--log", default=None)
    args = parser.parse_args(argv)
    from twisted.internet import reactor

    with open(args.pages, encoding="utf-8") as f:
        pages = json.load(f)
    factory = ScriptedFactory(pages, args.log, reactor)
    port = args.port
    for ip in args.ip:
        listening = reactor.listenTCP(port, factory, interface=ip)
        port = listening.getHost().port
    factory.port = port
    print(json.dumps({"port": port}), flush=True)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
