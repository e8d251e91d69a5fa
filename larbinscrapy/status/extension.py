"""``StatusServer``: larbin's status page (httpPort) and URL input (inputPort) for a running
crawl."""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet import error, task
from twisted.internet.protocol import ServerFactory

from larbinscrapy.frontier import frontier_of
from larbinscrapy.middlewares.pause import PauseGate
from larbinscrapy.parse.urls import MAX_PORT
from larbinscrapy.politeness.dns import SsrfGuard, dns_cache
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.status.auth import make_token, remove_job_files, save_job_files
from larbinscrapy.status.history import HostCounter, RateHistory
from larbinscrapy.status.inject import UrlInjector
from larbinscrapy.status.probe import frontier_status
from larbinscrapy.status.snapshot import build_status

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.interfaces import IAddress
    from twisted.internet.protocol import Protocol
    from twisted.internet.tcp import Port
    from twisted.web.server import Site

    from larbinscrapy.frontier import AllWorkers

logger = logging.getLogger(__name__)


def parse_port_range(value: Any) -> list[int] | None:
    """``[8081, 8181]``, ``"8081,8181"``, ``8081`` -> a port range; ``0``/empty -> None (off)."""
    if value in (None, "", 0, "0", [], ()):
        return None
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(items, int):
        items = [items]
    try:
        ports = [int(str(p).strip()) for p in items]
    except (TypeError, ValueError):
        raise ValueError(f"LARBIN_STATUS_PORT must be a port or a range, got {value!r}") from None
    if ports == [0]:
        return None
    if (
        len(ports) not in (1, 2)
        or not all(0 < p <= MAX_PORT for p in ports)
        or ports[0] > ports[-1]
    ):
        raise ValueError(f"LARBIN_STATUS_PORT must be a port or a range, got {value!r}")
    return ports


def listen_first_free(ports: list[int], host: str, factory: ServerFactory) -> Port:
    """Listen on the first port of ``ports`` (one port or a range) that is free.

    Not Scrapy's ``listen_tcp``: it moves on only when ``bind()`` fails. Two crawls started
    together (scrapyd jobs, workers on one machine) can both bind a port, as SO_REUSEADDR
    allows while neither listens, and the second to call ``listen()`` then gets EADDRINUSE as
    a bare OSError: a traceback and no status page. Here that port is taken too, as it is.
    """
    reactor = installed_reactor()
    lost: error.CannotListenError | None = None
    for port in range(ports[0], ports[-1] + 1):
        try:
            return reactor.listenTCP(port, factory, interface=host)
        except error.CannotListenError as exc:
            lost = exc
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            lost = error.CannotListenError(host, port, exc)
    assert lost is not None  # parse_port_range gives at least one port
    raise lost


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SiteOnFirstConnection(ServerFactory):
    """A listening factory that builds the real one (``build()``) when the first client connects.

    The port is bound at engine start (its address is logged and written to ``JOBDIR``), but
    what serves it is imported and built only if someone connects.
    """

    noisy = False

    def __init__(self, build: Callable[[], Site]) -> None:
        self._build = build
        self.site: Site | None = None

    def buildProtocol(self, addr: IAddress | None) -> Protocol | None:
        if self.site is None:
            self.site = self._build()
            self.site.doStart()
        return self.site.buildProtocol(addr)

    def stopFactory(self) -> None:
        if self.site is not None:
            self.site.doStop()


class StatusServer:
    """The status page, control API and metrics of one crawl (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        *,
        host: str,
        ports: list[int],
        token: str,
        jobdir: str | None,
        history_seconds: float,
        sample_interval: float,
        busiest: int,
        max_body: int,
        max_urls: int,
    ) -> None:
        self.crawler = crawler
        self.host = host
        self.ports = ports
        self.token = token
        self.jobdir = jobdir
        self.sample_interval = sample_interval
        self.busiest = busiest
        self.history = RateHistory(history_seconds, sample_interval)
        self.hosts = HostCounter()
        self.injector = UrlInjector(crawler, SsrfGuard.from_settings(crawler.settings))
        self.max_body = max_body
        self.max_urls = max_urls
        self.address: str | None = None
        self.port: Port | None = None
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._started = time.time()
        self._loop: task.LoopingCall | None = None
        sig = crawler.signals
        sig.connect(self._engine_started, signal=signals.engine_started)
        sig.connect(self._spider_closed, signal=signals.spider_closed)
        sig.connect(self._response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatusServer:
        s = crawler.settings
        try:
            ports = parse_port_range(s.get("LARBIN_STATUS_PORT"))
        except ValueError as exc:
            logger.error("%s: the status page is off", exc)
            raise NotConfigured from None
        if ports is None:
            raise NotConfigured
        host = s.get("LARBIN_STATUS_HOST")
        if not is_loopback(host):
            if not s.getbool("LARBIN_STATUS_ALLOW_REMOTE"):
                logger.error(
                    "LARBIN_STATUS_HOST=%s is not a loopback address: set "
                    "LARBIN_STATUS_ALLOW_REMOTE=True to serve the status page there; "
                    "the status page is off",
                    host,
                )
                raise NotConfigured
            logger.warning(
                "The status page listens on %s: anyone who can reach it and has the "
                "token can steer the crawl (plain HTTP: put TLS in front)",
                host,
            )
        return cls(
            crawler,
            host=host,
            ports=ports,
            token=make_token(s.get("LARBIN_STATUS_TOKEN")),
            jobdir=s.get("JOBDIR") or None,
            history_seconds=s.getfloat("LARBIN_STATUS_HISTORY"),
            sample_interval=s.getfloat("LARBIN_STATUS_SAMPLE_INTERVAL"),
            busiest=s.getint("LARBIN_STATUS_BUSIEST_HOSTS"),
            max_body=s.getint("LARBIN_STATUS_BODY_MAX"),
            max_urls=s.getint("LARBIN_STATUS_URLS_MAX"),
        )

    # -- lifecycle --------------------------------------------------------------------------
    def _engine_started(self) -> None:
        self._started = time.time()
        try:
            port = listen_first_free(self.ports, self.host, SiteOnFirstConnection(self._site))
        except error.CannotListenError as exc:
            logger.error(
                "Status page: no free port in %s on %s (%s); crawling without it",
                "-".join(map(str, self.ports)),
                self.host,
                exc.socketError,
            )
            return
        self.port = port
        bound = port.getHost()
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.address = f"http://{host}:{bound.port}"
        if self.jobdir:
            save_job_files(self.jobdir, self.token, self.address)
        logger.info("Status page: %s/#token=%s", self.address, self.token)
        self._loop = task.LoopingCall(self._sample)
        self._loop.start(self.sample_interval, now=True)

    def _spider_closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.port is not None:
            self.port.stopListening()
            self.port = None
            if self.jobdir:
                remove_job_files(self.jobdir)

    def _site(self) -> Site:
        from larbinscrapy.status.web import status_site

        return status_site(self, self.max_body, self.max_urls)

    def _sample(self) -> None:
        self.history.sample(time.time(), self.crawler.stats.get_stats())

    def _response_received(self, response: Response, request: Request) -> None:
        self.hosts.count(urlparse_cached(request).hostname or "")

    # -- what the endpoints read and do -------------------------------------------------
    def document(self) -> dict[str, Any]:
        try:
            cached: int | None = len(dns_cache(self.crawler))
        except (AttributeError, TypeError):
            cached = None
        return build_status(
            stats=self.crawler.stats.get_stats(),
            frontier=frontier_status(self.crawler),
            rates=self.history.rates(),
            paused=self.paused,
            stopping=self.stopping,
            all_workers=self.all_workers,
            uptime=time.time() - self._started,
            busiest=self.hosts.top(self.busiest),
            dns_cached=cached,
            worker=self.worker,
        )

    def _gate(self) -> PauseGate | None:
        return self.crawler.get_downloader_middleware(PauseGate)

    def _all_workers(self) -> AllWorkers | None:
        frontier = frontier_of(self.crawler)
        return frontier.all_workers if frontier is not None else None

    @property
    def paused(self) -> bool:
        gate = self._gate()
        return gate is not None and gate.paused

    @property
    def stopping(self) -> bool:
        gate = self._gate()
        return gate is not None and gate.stopped

    @property
    def all_workers(self) -> str | None:
        """The last command for every worker ("" before any); None: not a shared frontier."""
        control = self._all_workers()
        return control.command if control is not None else None

    def control(self, command: str, every_worker: bool) -> bool:
        """``pause``, ``resume`` or ``stop`` this worker, or every worker of the crawl (one
        worker, the whole crawl, without a shared frontier); False without ``PauseGate``."""
        gate = self._gate()
        if gate is None:
            return False
        shared = self._all_workers() if every_worker else None
        if shared is not None:
            shared.ask(command)
            return True
        source = "the status page"
        switch = {"pause": gate.pause_crawl, "resume": gate.resume_crawl, "stop": gate.stop_crawl}
        switch[command](source)
        return True
