"""``python -m testweb.trickle``: an HTTP server that sends bodies slowly, for page-timeout tests.

``GET /trickle/<bytes per second>/<size>.html`` answers ``200`` with ``size`` bytes of HTML,
written in ten chunks a second at the given rate (headers first, at once). Listens on
``--ip`` (a loopback address), port 0 by default, and prints ``{"port": N}`` once it listens.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from twisted.internet import task
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

TICK = 0.1


class TrickleResource(Resource):
    """Answers ``/trickle/<rate>/<size>.html`` at ``rate`` bytes a second, ten ticks a second."""

    isLeaf = True

    def __init__(self, reactor: Any) -> None:
        super().__init__()
        self.reactor = reactor

    def render_GET(self, request: Request) -> bytes | int:
        parts = request.path.decode().strip("/").split("/")
        if len(parts) != 3 or parts[0] != "trickle":
            request.setResponseCode(404)
            return b"not found"
        rate, size = int(parts[1]), int(parts[2].split(".")[0])
        body = (b"<html><body>" + b"x" * size)[:size]
        request.setHeader("Content-Type", "text/html")
        request.setHeader("Content-Length", str(size))
        chunk = max(1, int(rate * TICK))
        sent = 0

        def send() -> None:
            nonlocal sent
            if request.finished or request._disconnected:
                loop.stop()
                return
            request.write(body[sent : sent + chunk])
            sent += chunk
            if sent >= size:
                loop.stop()
                request.finish()

        loop = task.LoopingCall(send)
        loop.clock = self.reactor
        loop.start(TICK, now=True)
        return NOT_DONE_YET


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testweb.trickle", description=__doc__)
    parser.add_argument("--ip", default="127.0.4.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    from twisted.internet import reactor

    port = reactor.listenTCP(args.port, Site(TrickleResource(reactor)), interface=args.ip)
    print(json.dumps({"port": port.getHost().port}), flush=True)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
