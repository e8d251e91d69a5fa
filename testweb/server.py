"""Serve a ``Web`` over real HTTP: one loopback IP per host, one port for all, a request log.

Every request is routed by its Host header (port stripped) and logged as one JSON line,
flushed at once so a test can read the log during the crawl and after a ``kill -9``.
Responses to IPs in ``web.slow_ips`` are delayed with ``reactor.callLater`` (never blocking).
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import IO, TYPE_CHECKING, Any

from twisted.internet.error import CannotListenError
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from testweb.web import Page, Web, not_found_page

if TYPE_CHECKING:
    from twisted.internet.interfaces import IListeningPort

logger = logging.getLogger(__name__)

BIND_ATTEMPTS = 20


class RequestLog:
    """Append-only JSON lines, one per request, flushed per line."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._file: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, record: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class WebResource(Resource):
    """The one resource of the site: looks the page up by Host header and request-target."""

    isLeaf = True

    def __init__(self, web: Web, log: RequestLog, slow_delay: float, reactor: Any) -> None:
        super().__init__()
        self.web = web
        self.log = log
        self.slow_delay = slow_delay
        self.reactor = reactor

    def render(self, request: Request) -> bytes | int:
        arrived = time.time()
        ip = request.getHost().host
        host = _host_without_port(request.getHeader("host") or "")
        target = request.uri.decode("latin-1")
        page = self.web.lookup(host, target) or not_found_page()
        self.log.write(
            {"t": arrived, "ip": ip, "host": host, "path": target, "status": page.status}
        )
        request.setResponseCode(page.status)
        request.setHeader("Content-Type", page.content_type)
        for name, value in page.headers.items():
            request.setHeader(name, value)
        request.setHeader("Content-Length", str(len(page.body)))
        if ip in self.web.slow_ips and self.slow_delay > 0:
            self._send_later(request, page)
            return NOT_DONE_YET
        return page.body

    def _send_later(self, request: Request, page: Page) -> None:
        """Answer after ``slow_delay`` seconds; give up quietly if the client left first."""

        def send() -> None:
            request.write(page.body)
            request.finish()

        call = self.reactor.callLater(self.slow_delay, send)
        request.notifyFinish().addErrback(lambda _: call.cancel() if call.active() else None)


def _host_without_port(header: str) -> str:
    host = header.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.rsplit(":", 1)[0] if ":" in host else host


def make_site(web: Web, log: RequestLog, slow_delay: float, reactor: Any) -> Site:
    site = Site(WebResource(web, log, slow_delay, reactor))
    site.displayTracebacks = False
    site.log = lambda request: None  # the JSON request log replaces the access log
    return site


def listen_all(
    site: Site, ips: list[str], port: int, reactor: Any
) -> tuple[int, list[IListeningPort]]:
    """Listen on the same port on every IP; with ``port`` 0, retry the set until one port fits."""
    error: CannotListenError | None = None
    for _ in range(BIND_ATTEMPTS):
        listeners: list[IListeningPort] = []
        try:
            listeners.append(reactor.listenTCP(port, site, interface=ips[0]))
            chosen = listeners[0].getHost().port
            for ip in ips[1:]:
                listeners.append(reactor.listenTCP(chosen, site, interface=ip))
            return chosen, listeners
        except CannotListenError as exc:
            error = exc
            for listener in listeners:
                listener.stopListening()
            if port:
                break
            logger.debug("port taken on one IP, retrying with another: %s", exc)
    assert error is not None
    raise error


def write_info(path: str, info: dict[str, Any]) -> None:
    """Write the info document atomically, so a reader never sees half of it."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.replace(tmp, path)
