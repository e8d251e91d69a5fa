"""A web whose pages change on a known schedule, with validators and 304s; and sitemap sites.

``python -m testweb.changing --period 3 --log log.jsonl --info info.json`` serves, on loopback:

* ``r0.test`` .. ``r3.test`` (one IP each; ``--hosts N`` serves ``r0`` .. ``r<N-1>``): ``/``
  links to every page of its host; each page's kind is the first path segment:

  ========== ==================================== ===========================
  kind       changes                               validators
  ========== ==================================== ===========================
  never      never                                 ETag + Last-Modified
  always     on every request                      ETag + Last-Modified
  periodic   every ``--period`` seconds            ETag + Last-Modified
  lmonly     never                                 Last-Modified only
  plain      never                                 none (only the body tells)
  ========== ==================================== ===========================

  Conditional requests are answered as RFC 9110 says: ``If-None-Match`` decides when present,
  else ``If-Modified-Since`` against ``Last-Modified``; a match is a 304 without a body.
* ``s1.test``: pages reachable only through sitemaps: robots.txt lists a sitemap index, which
  lists one plain and one gzipped sitemap (with ``<lastmod>``/``<changefreq>``);
  ``s2.test``: no ``Sitemap:`` line, a ``/sitemap.xml``; ``s3.test``: a robots.txt listing a
  sitemap that is not XML and one whose gzip is broken; ``s4.test``: no robots.txt, and its
  ``/sitemap.xml`` is an HTML page with status 200 (a soft 404, as many sites answer).

Every request is logged as a JSON line: ``t``, ``host``, ``path``, ``status``, ``bytes`` (body
bytes sent), ``inm`` / ``ims`` (the conditional headers received, or null), ``ua`` (the
``User-Agent`` received: which worker of several fetched it).
"""

from __future__ import annotations

import argparse
import gzip
import logging
import signal
import sys
import time
import zlib
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.web.resource import Resource
from twisted.web.server import Site

from testweb.harness import RunningWeb, launch
from testweb.server import RequestLog, listen_all, write_info

if TYPE_CHECKING:
    from twisted.web.server import Request

logger = logging.getLogger(__name__)


def revisit_hosts(n: int) -> dict[str, str]:
    """``r<i>.test`` -> its own IP, for ``n`` hosts (up to 245; clear of the sitemap hosts')."""
    return {f"r{i}.test": f"127.0.4.{i + 1 if i < 10 else i + 11}" for i in range(n)}


REVISIT_HOSTS = revisit_hosts(4)
SITEMAP_HOSTS = {
    "s1.test": "127.0.4.11",
    "s2.test": "127.0.4.12",
    "s3.test": "127.0.4.13",
    "s4.test": "127.0.4.14",
}
KINDS = {"never": 3, "always": 3, "periodic": 2, "lmonly": 1, "plain": 1}  # kind -> pages per host
PADDING = 4000  # body bytes per page, so a 304 visibly saves them
_FILLER = (b"revisit schedule interval streak validator " * 100)[:PADDING]


@dataclass
class Version:
    """One version of a changing page."""

    number: int
    since: float  # when this version appeared (its Last-Modified)


class ChangingWeb:
    """The model: which version each page is at now (pure but for the clock it is given)."""

    def __init__(self, port: int, period: float, start: float) -> None:
        self.port = port
        self.period = period
        self.start = start
        self.requests: dict[str, int] = {}  # path of an "always" page -> requests so far

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def pages(self, host: str) -> list[str]:
        return [f"/{kind}/{i}.html" for kind, n in KINDS.items() for i in range(n)]

    def version(self, host: str, path: str, now: float) -> Version | None:
        kind = path.split("/")[1] if path.count("/") == 2 else None
        if path == "/" or kind in ("never", "lmonly", "plain"):
            return Version(0, self.start - 86400)
        if kind == "always":
            key = host + path
            self.requests[key] = self.requests.get(key, 0) + 1
            return Version(self.requests[key], now)
        if kind == "periodic":
            number = int((now - self.start) // self.period)
            return Version(number, self.start + number * self.period)
        return None

    def body(self, host: str, path: str, version: Version) -> bytes:
        links = ""
        if path == "/":
            links = "".join(f'<a href="{p}">{p}</a>\n' for p in self.pages(host))
        head = (
            f"<html><head><title>{host}{path} v{version.number}</title></head><body>"
            f"<p>version {version.number}</p>\n{links}<p>"
        )
        return head.encode() + _FILLER + b"</p></body></html>"

    def validators(self, host: str, path: str, version: Version) -> dict[str, str]:
        kind = path.split("/")[1] or "never"
        headers = {}
        if kind in ("never", "always", "periodic"):
            headers["ETag"] = f'"{kind}-{zlib.crc32((host + path).encode()):08x}-v{version.number}"'
        if kind != "plain":
            headers["Last-Modified"] = formatdate(version.since, usegmt=True)
        return headers


def not_modified(request: Request, validators: dict[str, str]) -> bool:
    """RFC 9110 13.2.2: If-None-Match when present, else If-Modified-Since."""
    inm = request.getHeader("if-none-match")
    if inm is not None:
        etag = validators.get("ETag")
        tags = [t.strip() for t in inm.split(",")]
        return etag is not None and ("*" in tags or etag in tags)
    ims = request.getHeader("if-modified-since")
    modified = validators.get("Last-Modified")
    if ims is None or modified is None:
        return False
    try:
        return parsedate_to_datetime(modified) <= parsedate_to_datetime(ims)
    except (TypeError, ValueError):
        return False


def sitemap_files(web: ChangingWeb) -> dict[tuple[str, str], tuple[bytes, str]]:
    """(host, path) -> (body, content type) of the sitemap sites' robots.txt and sitemaps."""
    s1, s2 = (lambda p: web.url("s1.test", p)), (lambda p: web.url("s2.test", p))

    def urlset(urls: list[str]) -> bytes:
        entries = "".join(
            f"<url><loc>{u}</loc><lastmod>2026-11-01</lastmod><changefreq>daily</changefreq></url>"
            for u in urls
        )
        return (
            f'<?xml version="1.0" encoding="UTF-8"?><urlset '
            f'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        ).encode()

    index = (
        '<?xml version="1.0" encoding="UTF-8"?><sitemapindex '
        'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<sitemap><loc>{s1('/maps/a.xml')}</loc></sitemap>"
        f"<sitemap><loc>{s1('/maps/b.xml.gz')}</loc></sitemap></sitemapindex>"
    ).encode()
    xml, gz, text = "application/xml", "application/gzip", "text/plain"
    robots = f"User-agent: *\nDisallow:\nSitemap: {s1('/maps/index.xml')}\n"
    b_urls = urlset([s1(f"/only/b{i}.html") for i in range(5)])
    return {
        ("s1.test", "/robots.txt"): (robots.encode(), text),
        ("s1.test", "/maps/index.xml"): (index, xml),
        ("s1.test", "/maps/a.xml"): (urlset([s1(f"/only/a{i}.html") for i in range(5)]), xml),
        ("s1.test", "/maps/b.xml.gz"): (gzip.compress(b_urls), gz),
        ("s2.test", "/sitemap.xml"): (urlset([s2(f"/only/c{i}.html") for i in range(3)]), xml),
        ("s3.test", "/robots.txt"): (
            f"User-agent: *\nSitemap: {web.url('s3.test', '/bad.xml')}\n"
            f"Sitemap: {web.url('s3.test', '/bad.xml.gz')}\n".encode(),
            text,
        ),
        ("s3.test", "/bad.xml"): (b"<html><body>not a sitemap</body></html>", xml),
        ("s3.test", "/bad.xml.gz"): (b"\x1f\x8b\x08\x00garbage, not gzip", gz),
        ("s4.test", "/sitemap.xml"): (b"<html><body>Page not found</body></html>", "text/html"),
    }


class ChangingResource(Resource):
    """Serves the model's pages (with 304s for a matching validator) and the sitemap files."""

    isLeaf = True

    def __init__(self, web: ChangingWeb, log: RequestLog) -> None:
        super().__init__()
        self.web = web
        self.log = log
        self.files: dict[tuple[str, str], tuple[bytes, str]] = {}
        self.revisit_hosts = REVISIT_HOSTS

    def render(self, request: Request) -> bytes:
        now = time.time()
        host = (request.getHeader("host") or "").split(":")[0].lower()
        path = request.uri.decode("latin-1")
        status, body, headers = self._answer(request, host, path, now)
        request.setResponseCode(status)
        for name, value in headers.items():
            request.setHeader(name, value)
        if status != 304:
            request.setHeader("Content-Length", str(len(body)))
        self.log.write(
            {
                "t": now,
                "host": host,
                "path": path,
                "status": status,
                "bytes": len(body),
                "inm": request.getHeader("if-none-match"),
                "ims": request.getHeader("if-modified-since"),
                "ua": request.getHeader("user-agent"),
            }
        )
        return body

    def _answer(
        self, request: Request, host: str, path: str, now: float
    ) -> tuple[int, bytes, dict[str, str]]:
        if (host, path) in self.files:
            body, ctype = self.files[(host, path)]
            return 200, body, {"Content-Type": ctype}
        if host in SITEMAP_HOSTS:
            if path == "/" or path.startswith("/only/"):
                static = Version(0, self.web.start)
                return 200, self.web.body(host, path, static), {"Content-Type": "text/html"}
            return 404, b"not found", {"Content-Type": "text/plain"}
        version = self.web.version(host, path, now) if host in self.revisit_hosts else None
        if version is None:
            return 404, b"not found", {"Content-Type": "text/plain"}
        validators = self.web.validators(host, path, version)
        if not_modified(request, validators):
            return 304, b"", validators
        return 200, self.web.body(host, path, version), {"Content-Type": "text/html", **validators}


class RunningChangingWeb(RunningWeb):
    """``RunningWeb`` for the changing web: its model is ``ChangingWeb``, not a ``Web``."""

    def __init__(self, proc: Any, info: dict[str, Any], stderr_path: Path) -> None:
        self.proc = proc
        self.port = info["port"]
        self.hosts = info["hosts"]
        self.seeds = info["seeds"]
        self.revisit_hosts = info.get("revisit_hosts", list(REVISIT_HOSTS))
        self.log_path = Path(info["log"])
        self.stderr_path = stderr_path
        self.changing = ChangingWeb(self.port, info["period"], info["start"])

    def url(self, host: str, path: str = "/") -> str:
        return self.changing.url(host, path)


def start_changing(
    tmp_path: str | Path, period: float = 3.0, hosts: int = len(REVISIT_HOSTS)
) -> RunningChangingWeb:
    """Start ``python -m testweb.changing`` with its files in ``tmp_path``."""
    proc, info, stderr_path = launch(
        tmp_path, ["testweb.changing", "--period", str(period), "--hosts", str(hosts)]
    )
    return RunningChangingWeb(proc, info, stderr_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testweb.changing", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--period", type=float, default=3.0, help="seconds between versions")
    parser.add_argument(
        "--hosts",
        type=int,
        default=len(REVISIT_HOSTS),
        help="revisited hosts r0.test ... (at most 245)",
    )
    parser.add_argument("--log", default=None)
    parser.add_argument("--info", default=None)
    args, _ = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="testweb %(message)s")
    from twisted.internet import reactor

    revisited = revisit_hosts(min(args.hosts, 245))
    hosts = {**revisited, **SITEMAP_HOSTS}
    log = RequestLog(args.log)
    resource = ChangingResource(ChangingWeb(0, args.period, time.time()), log)
    site = Site(resource)
    site.log = lambda request: None
    port, _ = listen_all(site, list(hosts.values()), args.port, reactor)
    web = resource.web = ChangingWeb(port, args.period, resource.web.start)
    resource.files = sitemap_files(web)
    resource.revisit_hosts = revisited
    seeds = [web.url(h) for h in revisited]
    info = {
        "port": port,
        "hosts": hosts,
        "seeds": seeds,
        "revisit_hosts": list(revisited),
        "log": args.log,
        "period": args.period,
        "start": web.start,
    }
    if args.info:
        write_info(args.info, info)
    reactor.addSystemEventTrigger("after", "shutdown", log.close)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: reactor.callFromThread(reactor.stop))
    reactor.run(installSignalHandlers=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
