"""``python -m testweb.polite``: hosts that throttle, answer slowly or send large pages.

For the politeness tests (tests/test_throttle.py). ``--hosts`` is a JSON object, one entry per
hostname::

    {"ra.test": {"ip": "127.0.5.1", "pages": 6, "throttle": 2, "retry_after": "3"}}

* ``pages``: ``/`` links to ``/p1.html`` ... ``/p<pages-1>.html`` (leaves linking back to ``/``);
* ``throttle``: the first this many page requests (robots.txt excluded) answer ``status``
  (default 429) with ``Retry-After: <retry_after>`` when given; ``"date:N"`` sends an
  HTTP-date N seconds ahead instead of delta-seconds;
* ``size``: body bytes of every page (padding after the links); ``slow``: seconds before the
  answer is sent.

robots.txt and /sitemap.xml are 404 (everything allowed, no sitemap) and never throttled.
Every request is logged as one JSON line (``t``, ``ip``, ``host``, ``path``, ``status``,
``bytes``, the ``from`` and ``via`` headers), flushed at once, like ``testweb.server``.
"""

from __future__ import annotations

import argparse
import email.utils
import json
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from testweb.server import RequestLog, _host_without_port, listen_all, write_info

if TYPE_CHECKING:
    from collections.abc import Iterator


class PoliteResource(Resource):
    """Serves each host as ``--hosts`` describes it and logs every request."""

    isLeaf = True

    def __init__(
        self, hosts: dict[str, dict[str, Any]], port: int, log: RequestLog, reactor: Any
    ) -> None:
        super().__init__()
        self.hosts = hosts
        self.port = port
        self.log = log
        self.reactor = reactor
        self.page_requests: Counter[str] = Counter()

    def render_GET(self, request: Request) -> bytes | int:
        arrived = time.time()
        host = _host_without_port(request.getHeader("host") or "")
        path = request.uri.decode("latin-1")
        spec = self.hosts.get(host)
        status, headers, body = self._answer(host, path, spec, arrived)
        self.log.write(
            {
                "t": arrived,
                "ip": request.getHost().host,
                "host": host,
                "path": path,
                "status": status,
                "bytes": len(body),
                "from": request.getHeader("from"),
                "via": request.getHeader("via"),
            }
        )
        request.setResponseCode(status)
        for name, value in headers.items():
            request.setHeader(name, value)
        request.setHeader("Content-Type", "text/html")
        request.setHeader("Content-Length", str(len(body)))
        slow = float(spec.get("slow", 0)) if spec else 0.0
        if slow <= 0:
            return body

        def send() -> None:
            request.write(body)
            request.finish()

        call = self.reactor.callLater(slow, send)
        request.notifyFinish().addErrback(lambda _: call.cancel() if call.active() else None)
        return NOT_DONE_YET

    def _answer(
        self, host: str, path: str, spec: dict[str, Any] | None, now: float
    ) -> tuple[int, dict[str, str], bytes]:
        if spec is None or path in ("/robots.txt", "/sitemap.xml"):
            return 404, {}, b"not found"
        self.page_requests[host] += 1
        if self.page_requests[host] <= int(spec.get("throttle", 0)):
            headers = {}
            retry_after = spec.get("retry_after")
            if retry_after is not None:
                retry_after = str(retry_after)
                if retry_after.startswith("date:"):
                    ahead = float(retry_after[5:])
                    retry_after = email.utils.formatdate(now + ahead, usegmt=True)
                headers["Retry-After"] = retry_after
            return int(spec.get("status", 429)), headers, b"slow down"
        pages = int(spec.get("pages", 1))
        names = ["/"] + [f"/p{k}.html" for k in range(1, pages)]
        if path not in names:
            return 404, {}, b"not found"
        links = names[1:] if path == "/" else ["/"]
        html = f"<html><head><title>{host}{path}</title></head><body>" + "".join(
            f'<a href="{n}">{n}</a>' for n in links
        )
        body = html.encode() + b"</body></html>"
        size = int(spec.get("size", 0))
        if size > len(body):
            body += b" " * (size - len(body))
        return 200, {}, body


def page_urls(hosts: dict[str, dict[str, Any]], port: int) -> set[str]:
    """Every page URL the hosts serve (what a complete crawl fetches, robots.txt excluded)."""
    urls = set()
    for host, spec in hosts.items():
        pages = int(spec.get("pages", 1))
        urls.add(f"http://{host}:{port}/")
        urls.update(f"http://{host}:{port}/p{k}.html" for k in range(1, pages))
    return urls


class RunningPolite:
    """A running ``testweb.polite``: port, hosts, seeds, request log."""

    def __init__(self, proc: Any, info: dict[str, Any], hosts: dict[str, dict[str, Any]]):
        self.proc = proc
        self.port: int = info["port"]
        self.hosts = hosts
        self.log_path = Path(info["log"])
        self.resolve = {h: spec["ip"] for h, spec in hosts.items()}
        self.seeds = [f"http://{h}:{self.port}/" for h in hosts]

    def read_log(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        lines = self.log_path.read_text(encoding="utf-8").splitlines(keepends=True)
        return [json.loads(line) for line in lines if line.endswith("\n")]

    def pages(self) -> set[str]:
        return page_urls(self.hosts, self.port)


@contextmanager
def start(tmp_path: Path, hosts: dict[str, dict[str, Any]]) -> Iterator[RunningPolite]:
    """Run the server for ``hosts`` until the block ends."""
    from testweb.harness import launch

    proc, info, _ = launch(tmp_path, ["testweb.polite", "--hosts", json.dumps(hosts)])
    try:
        yield RunningPolite(proc, info, hosts)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testweb.polite", description=__doc__)
    parser.add_argument("--hosts", required=True, help="JSON: hostname -> behaviour")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", default=None)
    parser.add_argument("--info", required=True)
    args = parser.parse_args(argv)
    hosts = json.loads(args.hosts)
    from twisted.internet import reactor

    log = RequestLog(args.log)
    resource = PoliteResource(hosts, 0, log, reactor)
    site = Site(resource)
    site.log = lambda request: None
    ips = sorted({spec["ip"] for spec in hosts.values()})
    port, _ = listen_all(site, ips, args.port, reactor)
    resource.port = port
    write_info(
        args.info, {"port": port, "log": args.log, "hosts": {h: s["ip"] for h, s in hosts.items()}}
    )
    reactor.run()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
