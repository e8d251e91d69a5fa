"""The HTTP side of ``StatusServer``: routes, the token check, JSON in and out (twisted.web)."""

from __future__ import annotations

import json
import logging
from importlib import resources
from typing import TYPE_CHECKING, Any

from twisted.internet import defer
from twisted.web import resource, server

from larbinscrapy.status.auth import authorized, same_origin
from larbinscrapy.status.inject import BadPayload, parse_batch

if TYPE_CHECKING:
    from twisted.web.server import Request

    from larbinscrapy.status.extension import StatusServer

logger = logging.getLogger(__name__)

_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


class _QuietSite(server.Site):
    """No access log: the page polls every second, and a ``?token=`` URL must not be logged."""

    noisy = False

    def log(self, request: Any) -> None:
        return None


def status_site(status: StatusServer, max_body: int, max_urls: int) -> server.Site:
    """The twisted.web site of ``status``: one ``StatusResource``, no access log."""
    return _QuietSite(StatusResource(status, max_body, max_urls))


def page_bytes() -> bytes:
    """``assets/index.html`` with ``app.js`` and ``style.css`` inlined: one self-contained page."""
    assets = resources.files("larbinscrapy.status").joinpath("assets")
    html = assets.joinpath("index.html").read_text(encoding="utf-8")
    html = html.replace("/*STYLE*/", assets.joinpath("style.css").read_text(encoding="utf-8"))
    html = html.replace("/*SCRIPT*/", assets.joinpath("app.js").read_text(encoding="utf-8"))
    return html.encode("utf-8")


class StatusResource(resource.Resource):
    """One leaf resource that routes on the path (the API is small and fixed)."""

    isLeaf = True

    def __init__(self, status: StatusServer, max_body: int, max_urls: int) -> None:
        super().__init__()
        self.status = status
        self.max_body = max_body
        self.max_urls = max_urls
        self.page = page_bytes()
        self._gets = {
            b"/api/status": self._get_status,
            b"/api/history": self._get_history,
            b"/metrics": self._get_metrics,
        }
        # (command, for every worker of a distributed crawl)
        self._posts = {
            b"/api/pause": ("pause", False),
            b"/api/resume": ("resume", False),
            b"/api/stop": ("stop", False),
            b"/api/pause-all": ("pause", True),
            b"/api/resume-all": ("resume", True),
            b"/api/stop-all": ("stop", True),
        }

    def render(self, request: Request) -> bytes | int:
        request.setHeader(b"cache-control", b"no-store")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"x-frame-options", b"DENY")
        path = request.path
        method = request.method
        if path in (b"/", b"/index.html") and method in (b"GET", b"HEAD"):
            request.setHeader(b"content-type", b"text/html; charset=utf-8")
            request.setHeader(b"content-security-policy", _CSP.encode())
            return self.page
        known = path in self._gets or path in self._posts or path == b"/api/urls"
        if not known:
            return _json(request, 404, {"error": "no such endpoint"})
        if not authorized(request, self.status.token):
            request.setHeader(b"www-authenticate", b'Bearer realm="larbinscrapy"')
            return _json(request, 401, {"error": "missing or wrong token"})
        if path in self._gets:
            if method not in (b"GET", b"HEAD"):
                return _method_not_allowed(request, b"GET")
            return self._gets[path](request)
        if method != b"POST":
            return _method_not_allowed(request, b"POST")
        if not same_origin(request):
            return _json(request, 403, {"error": "cross-origin request refused"})
        if path == b"/api/urls":
            return self._post_urls(request)
        return self._post_control(request, *self._posts[path])

    def _post_control(self, request: Request, command: str, every_worker: bool) -> bytes:
        status = self.status
        if not status.control(command, every_worker):
            return _json(request, 503, {"error": "pause and stop need PauseGate (a middleware)"})
        return _json(
            request,
            200,
            {
                "ok": True,
                "paused": status.paused,
                "stopping": status.stopping,
                "all_workers": status.all_workers,
            },
        )

    def _get_status(self, request: Request) -> bytes:
        return _json(request, 200, self.status.document())

    def _get_history(self, request: Request) -> bytes:
        since = _float_arg(request, b"since")
        return _json(request, 200, self.status.history.series(since))

    def _get_metrics(self, request: Request) -> bytes:
        from larbinscrapy.status import metrics

        request.setHeader(b"content-type", metrics.CONTENT_TYPE.encode())
        return metrics.render(self.status.document())

    def _post_urls(self, request: Request) -> bytes | int:
        content = request.content
        body = content.read(self.max_body + 1) if content is not None else b""
        if len(body) > self.max_body:
            return _json(request, 413, {"error": f"body over {self.max_body} bytes"})
        try:
            batch = parse_batch(body, self.max_urls)
        except BadPayload as exc:
            return _json(request, 400, {"error": str(exc)})
        d = defer.ensureDeferred(self.status.injector.add(batch))
        d.addCallback(lambda out: _finish(request, 200, out.as_json()))
        d.addErrback(self._failed, request)
        return server.NOT_DONE_YET

    def _failed(self, failure: Any, request: Request) -> None:
        logger.error(
            "Adding URLs failed: %s",
            failure.getErrorMessage(),
            exc_info=(failure.type, failure.value, failure.getTracebackObject()),
        )
        _finish(request, 500, {"error": "internal error, see the crawl log"})


def _float_arg(request: Request, name: bytes) -> float:
    values = request.args.get(name) if request.args else None
    try:
        return float(values[0]) if values else 0.0
    except ValueError:
        return 0.0


def _json(request: Request, code: int, doc: Any) -> bytes:
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"application/json")
    return json.dumps(doc, default=str, separators=(",", ":")).encode()


def _finish(request: Request, code: int, doc: Any) -> None:
    if request.finished or request.channel is None:  # the client went away
        return
    request.write(_json(request, code, doc))
    request.finish()


def _method_not_allowed(request: Request, allowed: bytes) -> bytes:
    request.setHeader(b"allow", allowed)
    return _json(request, 405, {"error": f"use {allowed.decode()}"})
