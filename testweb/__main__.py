"""``python -m testweb``: serve a test web on loopback until SIGTERM/SIGINT.

Prints the info document (port, hosts, seeds, log path) as one JSON line on stdout once every
IP listens, and writes it to ``--info`` if given.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from typing import Any

from twisted.internet.error import CannotListenError

from testweb.hostile import HostileFactory, build_hostile
from testweb.server import RequestLog, listen_all, make_site, write_info
from testweb.web import WEB_NAMES, build_web

logger = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testweb", description=__doc__)
    parser.add_argument(
        "--web", choices=(*WEB_NAMES, "hostile"), default="default", help="which web to serve"
    )
    parser.add_argument("--port", type=int, default=0, help="port for every host (0: any free one)")
    parser.add_argument("--log", default=None, help="append one JSON line per request here")
    parser.add_argument("--slow-delay", type=float, default=1.5, help="seconds the slow host waits")
    parser.add_argument("--info", default=None, help="write the info document here (atomically)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="testweb %(levelname)s %(message)s"
    )
    from twisted.internet import reactor

    # the pages name the port, which is known only once bound; the IPs do not depend on it
    hostile = args.web == "hostile"
    placeholder = build_hostile(0) if hostile else build_web(args.web, 0)
    ips = list(dict.fromkeys(placeholder.hosts.values()))
    log = RequestLog(args.log)
    site: Any = (
        HostileFactory(placeholder, log, reactor)
        if hostile  # type: ignore[arg-type]
        else make_site(placeholder, log, args.slow_delay, reactor)
    )  # type: ignore[arg-type]
    try:
        port, _ = listen_all(site, ips, args.port, reactor)
    except CannotListenError as exc:
        logger.error("cannot listen: %s", exc)
        return 2
    web: Any = build_hostile(port) if hostile else build_web(args.web, port)
    # before reactor.run(), so no request ever sees the placeholder
    if hostile:
        site.web = web
    else:
        site.resource.web = web
    info = {"port": port, "hosts": web.hosts, "seeds": web.seeds, "log": args.log}
    if args.info:
        write_info(args.info, info)
    print(json.dumps(info), flush=True)
    pages = len(web.routes) if hostile else len(web.pages)
    logger.info("serving the %s web (%d pages) on %d IPs, port %d", args.web, pages, len(ips), port)
    reactor.addSystemEventTrigger("after", "shutdown", log.close)

    def stop(signum: int, frame: Any) -> None:
        logger.info("signal %d: stopping", signum)
        reactor.callFromThread(reactor.stop)

    # explicit handlers: a clean stop (log closed, exit 0) whatever Twisted's defaults are
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    reactor.run(installSignalHandlers=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
