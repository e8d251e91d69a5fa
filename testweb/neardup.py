"""``python -m testweb.neardup``: hosts that serve near-duplicates of each other's pages.

For the shared near-duplicate tests (tests/test_distributed_neardup.py). ``--hosts N`` hosts
``n<k>.test`` (IP ``127.0.6.<k+1>``) each serve ``/`` and ``/p1.html`` ... ``/p<P-1>.html``
(``--pages P``); ``/`` links to every ``/p<i>.html``, each of which links back to ``/``. The
page ``path`` of every host carries the same text (``WORDS`` words chosen by the path), but for
one word chosen by the host: the N copies of a path are near-duplicates of each other (a few
simhash bits apart), the pages of two paths are unrelated. ``body(k, i)`` is pure: a test
computes the simhashes it expects.

robots.txt and /sitemap.xml are 404. Every request is logged as one JSON line (``t``, ``ip``,
``host``, ``path``, ``status``), flushed at once, like ``testweb.server``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from testweb.server import RequestLog, _host_without_port, listen_all, write_info

if TYPE_CHECKING:
    from collections.abc import Iterator

WORDS = 1000


def hosts(count: int) -> dict[str, str]:
    """Hostname -> IP."""
    return {f"n{k}.test": f"127.0.6.{k + 1}" for k in range(count)}


def paths(pages: int) -> list[str]:
    return ["/"] + [f"/p{i}.html" for i in range(1, pages)]


def body(host_index: int, path_index: int, pages: int) -> bytes:
    """Page ``path_index`` of host ``host_index``: the path's text, one word the host's own."""
    words = [f"w{(n * 7919 + path_index * 104729) % 100003}" for n in range(WORDS)]
    words[20 + 7 * host_index] = f"host{host_index}"
    links = paths(pages)[1:] if path_index == 0 else ["/"]
    anchors = "".join(f'<a href="{u}">{u}</a>' for u in links)
    return (
        f"<html><head><title>page {path_index}</title></head><body>"
        f"<p>{' '.join(words)}</p>{anchors}</body></html>"
    ).encode()


class NearDupResource(Resource):
    """Serves every host's pages (module docstring) and logs every request."""

    isLeaf = True

    def __init__(self, names: list[str], pages: int, log: RequestLog) -> None:
        super().__init__()
        self.names = names
        self.pages = pages
        self.log = log

    def render_GET(self, request: Request) -> bytes:
        host = _host_without_port(request.getHeader("host") or "")
        path = request.uri.decode("latin-1")
        status, page = 404, b"not found"
        if host in self.names and path in paths(self.pages):
            status = 200
            page = body(self.names.index(host), paths(self.pages).index(path), self.pages)
        self.log.write(
            {
                "t": time.time(),
                "ip": request.getHost().host,
                "host": host,
                "path": path,
                "status": status,
            }
        )
        request.setResponseCode(status)
        request.setHeader("Content-Type", "text/html")
        return page


class RunningNearDup:
    """A running ``testweb.neardup``: port, hosts, seeds, request log."""

    def __init__(self, proc: Any, info: dict[str, Any], pages: int) -> None:
        self.proc = proc
        self.port: int = info["port"]
        self.resolve: dict[str, str] = info["hosts"]
        self.seeds: list[str] = info["seeds"]
        self.log_path = Path(info["log"])
        self.pages = pages

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines(keepends=True)
        return [json.loads(line) for line in lines if line.endswith("\n")]

    def page_urls(self) -> set[str]:
        return {f"http://{h}:{self.port}{p}" for h in self.resolve for p in paths(self.pages)}


@contextmanager
def start(tmp_path: Path, count: int, pages: int) -> Iterator[RunningNearDup]:
    """Run the server for ``count`` hosts of ``pages`` pages until the block ends."""
    from testweb.harness import launch

    proc, info, _ = launch(
        tmp_path, ["testweb.neardup", "--hosts", str(count), "--pages", str(pages)]
    )
    try:
        yield RunningNearDup(proc, info, pages)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testweb.neardup", description=__doc__)
    parser.add_argument("--hosts", type=int, default=6)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--info", required=True)
    args = parser.parse_args(argv)
    from twisted.internet import reactor

    names = hosts(args.hosts)
    log = RequestLog(args.log)
    site = Site(NearDupResource(list(names), args.pages, log))
    site.log = lambda request: None
    port, _ = listen_all(site, list(names.values()), args.port, reactor)
    info: dict[str, Any] = {
        "port": port,
        "log": args.log,
        "hosts": names,
        "seeds": [f"http://{h}:{port}/" for h in names],
    }
    write_info(args.info, info)
    reactor.run()  # type: ignore[attr-defined]
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
