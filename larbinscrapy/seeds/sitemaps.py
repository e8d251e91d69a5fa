"""``SitemapReader``: each site's sitemaps feed its URLs to the frontier (``LARBIN_SITEMAPS``)."""

from __future__ import annotations

import logging
import time
import zlib
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urljoin

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, NotConfigured
from scrapy.http.request import NO_CALLBACK
from scrapy.robotstxt import ProtegoRobotParser
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.gz import gunzip
from scrapy.utils.job import job_dir
from scrapy.utils.sitemap import Sitemap
from twisted.internet.threads import deferToThread
from xxhash import xxh3_128_digest

from larbinscrapy import fatal
from larbinscrapy import meta as M
from larbinscrapy.frontier import Frontier, frontier_of, seen_set_of
from larbinscrapy.gate.admission import Admission, admission_of, source_of
from larbinscrapy.parse.urls import fingerprint_url, host_of, site_of, site_origin
from larbinscrapy.politeness.ipsites import politeness_of
from larbinscrapy.politeness.robotstxt import RobotsTxtParser, token_of
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.seeds.hints import sitemap_hint
from larbinscrapy.seeds.pending import PendingSites
from larbinscrapy.seeds.turns import Turns
from larbinscrapy.stopping import CrawlStopping, stopping

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from larbinscrapy.politeness import HostRegistry

logger = logging.getLogger(__name__)

TIERS = ("priority", "normal")
_GZIP_MAGIC = b"\x1f\x8b"
_UNFETCHED: Any = object()  # a site's first file not fetched on the page's lease: fetch it
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def read_key(site: str) -> bytes:
    """The dupefilter key of "``site``'s sitemaps were read" (no method: no request has it)."""
    return xxh3_128_digest(("SITEMAPS " + site).encode())


def guessed_sitemap(site: str) -> str:
    """The sitemap a site is asked for when its robots.txt names none (the protocol's place),
    its default port left out as a browser writes it."""
    return site_origin(site) + "/sitemap.xml"


class BrokenSitemap(ValueError):
    """A sitemap file that cannot be read; ``reason`` names the stat."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def parse_sitemap(
    body: bytes, max_bytes: int, max_urls: int
) -> tuple[str, list[dict[str, Any]], bool]:
    """(type, entries, truncated) of a sitemap file, gzipped or not; ``BrokenSitemap`` if none."""
    if body[:2] == _GZIP_MAGIC:
        try:
            body = gunzip(body, max_size=max_bytes)
        except (OSError, EOFError, ValueError, zlib.error) as exc:
            raise BrokenSitemap("broken", f"gzip: {exc}") from None
    if len(body) > max_bytes:
        raise BrokenSitemap("broken", f"{len(body)} bytes, more than {max_bytes}")
    try:
        sitemap = Sitemap(body)
        kind = sitemap.type
        if kind not in ("urlset", "sitemapindex"):
            raise BrokenSitemap("broken", f"root element <{kind}>")
        entries: list[dict[str, Any]] = []
        for entry in sitemap:
            if len(entries) >= max_urls:
                return kind, entries, True
            entries.append(entry)
    except BrokenSitemap:
        raise
    except Exception as exc:  # lxml raises many kinds on hostile input; none is fatal
        raise BrokenSitemap("broken", f"{type(exc).__name__}: {exc}") from None
    return kind, entries, False


class SitemapReader:
    """Reads each site's sitemaps once and queues their URLs (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        *,
        priority: bool,
        guess: bool,
        max_files: int,
        max_urls: int,
        max_bytes: int,
        fetches_max: int = 16,
        per_ip: int = 1,
        pending: Path | None = None,
        on_disk_error: Callable[[OSError], None] | None = None,
    ) -> None:
        self.crawler = crawler
        # as many files per IP as it has connections, a few in all, waiting here (turns.py)
        self._turns = Turns(fetches_max, per_ip)
        self._on_turn = self._go  # one bound method for every site that waits
        self._politeness: HostRegistry | None = None
        self._agent = token_of(crawler.settings)  # whose rules a file on a lease is read by
        self.stats = crawler.stats
        self.priority = priority
        self.guess = guess  # /sitemap.xml asked of a site whose robots.txt names none
        self.max_files, self.max_urls, self.max_bytes = max_files, max_urls, max_bytes
        self._admission: Admission | None = None  # the link gate's core, found at open
        self._frontier: Frontier | None = None  # a shared one says who reads which site
        self._mark: Callable[[bytes], bool] | None = None  # the seen-set's test-and-set...
        self._known: Callable[[bytes], bool] | None = None  # ...and its test without the set
        self._sites: set[str] = set()  # sites read, only without a dupefilter to mark them in
        self._reading: dict[str, None] = {}  # read or waiting (a set's table is sparser)
        # ...and on disk, for a resumed crawl (JOBDIR; a failed write stops the crawl)
        self._pending = PendingSites(pending, on_disk_error)
        self._closed = self._logged_broken = False
        sig = crawler.signals
        sig.connect(self._spider_opened, signal=signals.spider_opened)
        sig.connect(self._engine_started, signal=signals.engine_started)
        sig.connect(self._spider_idle, signal=signals.spider_idle)
        sig.connect(self._spider_closed, signal=signals.spider_closed)
        sig.connect(self._robots_parsed, signal=signals.robots_parsed)
        sig.connect(self._response_received, signal=signals.response_received)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapReader:
        s = crawler.settings
        if not s.getbool("LARBIN_SITEMAPS"):
            raise NotConfigured
        tier = (s.get("LARBIN_SITEMAP_PRIORITY") or "").strip().lower()
        if tier not in TIERS:
            raise NotConfigured(f"LARBIN_SITEMAP_PRIORITY must be one of {TIERS}, got {tier!r}")
        return cls(
            crawler,
            priority=tier == "priority",
            guess=s.getbool("LARBIN_SITEMAP_GUESS"),
            max_files=s.getint("LARBIN_SITEMAP_FILES_MAX"),
            max_urls=s.getint("LARBIN_SITEMAP_URLS_MAX"),
            max_bytes=s.getint("LARBIN_SITEMAP_BYTES_MAX"),
            fetches_max=max(1, s.getint("CONCURRENT_REQUESTS") // 8),
            per_ip=s.getint("LARBIN_IP_CONNECTIONS"),
            pending=Path(jobdir, "sitemaps", "pending") if (jobdir := job_dir(s)) else None,
            on_disk_error=fatal.disk_stopper(crawler, jobdir) if jobdir else None,
        )

    def _spider_opened(self, spider: Any = None) -> None:
        self._admission = admission_of(self.crawler)
        self._frontier = frontier_of(self.crawler)
        self._politeness = politeness_of(self.crawler)
        seen = seen_set_of(self.crawler)
        if seen is not None:
            self._mark, self._known = seen.seen_fingerprint, seen.knows_fingerprint
        shared = self._frontier is not None and self._frontier.sitemaps is not None
        if seen is None or shared:  # no "read" bits to tell; Redis workers: the shared claims
            self._pending = PendingSites(None)

    def _engine_started(self) -> None:
        """Read again the sites a stop or a kill left unread (``seeds/pending.py``), once the
        engine runs (``engine_started`` comes just before)."""
        try:
            pending = self._pending.open(self._was_read)
        except OSError as exc:
            self._pending.failed(exc)
            return
        if pending:
            logger.info("sitemaps: %d sites left unread by the last run read now", len(pending))
            self.stats.inc_value("larbin/sitemaps/resumed", len(pending))
            self._reading.update(
                dict.fromkeys(pending)
            )  # held from now: the first idle must not close
            installed_reactor().callLater(0, self._resume, pending)

    def _resume(self, pending: dict[str, list[str]]) -> None:
        if self._closed:
            return
        if not self.crawler.engine.running:  # engine_started's handlers still run: not yet
            installed_reactor().callLater(0.05, self._resume, pending)
            return
        for site, listed in pending.items():
            self._begin(site, listed)

    def _spider_idle(self, spider: Any = None) -> None:
        if self._reading:  # a site's files waiting for their IP's turn: URLs may follow
            raise DontCloseSpider

    def _spider_closed(self, spider: Any = None) -> None:
        self._closed = True
        self._pending.close()

    # -- which sites ------------------------------------------------------------------------
    async def _robots_parsed(self, robotparser: Any, request: Request) -> None:
        """A site whose robots.txt a page's lease read has its first file fetched now, on that
        lease, before the page (the page waits for this handler): over the site's connection
        while it is warm and its name is in the DNS cache. Read in its IP's turn, the file came
        after every other site's page of a busy address, on a new connection (and a new TLS
        handshake) once the server had closed the first. The other files wait their turn."""
        listed: list[str] = []  # ours and Protego keep the Sitemap: lines; Scrapy's others not
        if isinstance(robotparser, RobotsTxtParser):
            listed = list(robotparser.sitemaps)
        elif isinstance(robotparser, ProtegoRobotParser):
            listed = list(robotparser.rp.sitemaps)
        site = site_of(request.url)
        # nothing listed and no guess: nothing to read (checked here only: a page's answer
        # starts its site only with the guess on, when there is always a file)
        if not self._files(site, listed):
            return
        meta = request.meta
        lease = meta.get(M.LEASE, meta.get(M.BORROW))
        shared = self._frontier is not None and self._frontier.sitemaps is not None
        if lease is None or shared or not self._host_free(site):  # (shared: Redis workers)
            self._start(site, listed)
        elif self._starts(site):
            lent = {M.BORROW: lease, M.IP: meta.get(M.IP), "dont_obey_robotstxt": True}
            await self._begin_on_lease(site, listed, robotparser, lent)

    def _host_free(self, site: str) -> bool:
        """Whether ``site``'s host may be asked at once: a file on the page's lease must not
        hold the IP idle through the host's delay (the page itself goes back to the frontier
        then, and the file waits its turn as any other)."""
        if self._politeness is None:
            return False
        table = self._politeness.table
        return bool(table.hosts.next_start(host_of(site)) <= table.clock())

    async def _begin_on_lease(
        self, site: str, listed: list[str], robotparser: Any, lent: dict[str, Any]
    ) -> None:
        """Start ``site``: its first file fetched on the ``lent`` lease now, the rest later."""
        self._pending.add(site, listed)
        self._reading[site] = None
        self.stats.inc_value("larbin/sitemaps/sites")
        queue = self._files(site, listed)
        first = _UNFETCHED
        if robotparser.allowed(queue[0], self._agent):  # else: dropped the usual way
            try:
                first = await self._download(queue[0], lent)
            except CrawlStopping:  # unread: the resumed crawl reads it
                self._reading.pop(site, None)
                return
            self.stats.inc_value("larbin/sitemaps/on_lease")
        deferred_from_coro(self._read_site(site, queue, None, first))

    def _response_received(self, response: Response, request: Request, spider: Any = None) -> None:
        # a page (robots.txt and sitemaps are not) starts its site with the guess, if any
        if self.guess and request.callback is not NO_CALLBACK:
            self._start(site_of(response.url), [])

    def _start(self, site: str, listed: list[str]) -> None:
        if self._starts(site):
            self._pending.add(site, listed)
            self._begin(site, listed)

    def _starts(self, site: str) -> bool:
        """Whether ``site``'s reading starts now: not read, not being read, and (a stopping
        crawl sends nothing new) the resumed crawl is not the one to read it."""
        return (
            bool(site)
            and site not in self._reading
            and not self._was_read(site)
            and not stopping(self.crawler)
        )

    def _begin(self, site: str, listed: list[str]) -> None:
        self._reading[site] = None
        self.stats.inc_value("larbin/sitemaps/sites")
        # waits as a tuple of strings, not a coroutine nor a function (turns.py), for the
        # turn of its first file: one of the site's (a listed file elsewhere is not read)
        key = self._turn_key(site)
        self._turns.call(key, (self._on_turn, site, key, *listed))

    def _go(self, waiter: tuple[Any, ...]) -> None:
        """A site's first file holds its IP's turn: read the site, from the next reactor turn
        (not inside the signal handler or the ``give`` that called this)."""
        installed_reactor().callLater(0, self._read_now, waiter)

    def _read_now(self, waiter: tuple[Any, ...]) -> None:
        _, site, held, *listed = waiter
        deferred_from_coro(self._read_site(site, self._files(site, listed), held))

    def _files(self, site: str, listed: list[str]) -> list[str]:
        """The files to read first: the listed ones on the site, else the guessed one (none
        with ``LARBIN_SITEMAP_GUESS`` off: the site is not read)."""
        urls = [u for u in (urljoin(site + "/", u) for u in listed) if site_of(u) == site]
        return urls or ([guessed_sitemap(site)] if self.guess else [])

    def _was_read(self, site: str) -> bool:
        """Whether ``site``'s sitemaps were read, in this run or (JOBDIR) an earlier one."""
        if self._known is not None:
            return bool(self._known(read_key(site)))
        return site in self._sites

    def _read(self, site: str) -> None:
        """Mark ``site`` read: its files were fetched (or failed) and their URLs queued."""
        self._reading.pop(site, None)
        if self._mark is not None:
            self._mark(read_key(site))
        else:
            self._sites.add(site)

    # -- reading ------------------------------------------------------------------------------
    async def _read_site(
        self, site: str, queue: list[str], held: str | None, first: Any = _UNFETCHED
    ) -> None:
        """Read ``site``'s files; ``held``: the turn its first file holds (given back here
        unless ``_read_files`` takes it); ``first``: that file's answer, when fetched already."""
        shared = None if self._frontier is None else self._frontier.sitemaps  # Redis workers
        try:
            if shared is None or await shared.claim(site):  # there, one worker reads a site's
                turn, held = held, None
                await self._read_files(site, queue, turn, first)
        except CrawlStopping:  # unread: the resumed crawl reads it
            self._reading.pop(site, None)
            return
        except Exception as exc:  # a Redis claim that failed: unread, and the crawl goes on
            self._reading.pop(site, None)
            self.stats.inc_value("larbin/sitemaps/failed")
            logger.warning("Sitemaps of %s not read: %s", site, exc)
            return
        finally:
            if held is not None:
                self._turns.give(held)
        self._read(site)  # not reached if the process dies first: a resumed crawl reads it

    async def _read_files(
        self, site: str, queue: list[str], held: str | None, first: Any = _UNFETCHED
    ) -> None:
        """``held``: the first file's turn (given back if unused); ``first``: its lease answer."""
        files = 0
        try:
            while queue:
                if stopping(self.crawler):
                    raise CrawlStopping("the crawl is stopping")
                if files >= self.max_files:
                    self.stats.inc_value("larbin/sitemaps/capped")
                    return
                url = queue.pop(0)
                files += 1
                response, first = first, _UNFETCHED
                if response is _UNFETCHED or isinstance(response, str):  # (str: its target)
                    turn, held = held, None
                    response = await self._fetch(url if response is _UNFETCHED else response, turn)
                if response is None:
                    continue
                try:
                    kind, entries, truncated = await maybe_deferred_to_future(
                        deferToThread(parse_sitemap, response.body, self.max_bytes, self.max_urls)
                    )
                except BrokenSitemap as exc:
                    if url == guessed_sitemap(site):  # nobody said a sitemap was there: soft 404
                        self._missing(url, f"not a sitemap ({exc})")
                    else:
                        self._broken(url, exc)
                    continue
                self.stats.inc_value("larbin/sitemaps/files")
                if truncated:
                    self.stats.inc_value("larbin/sitemaps/truncated")
                if kind == "sitemapindex":
                    queue += [e["loc"] for e in entries if site_of(e["loc"]) == site]
                else:
                    self._queue(response, entries)
        finally:
            if held is not None:
                self._turns.give(held)

    def _turn_key(self, url: str) -> str:
        """The turn ``url`` waits for: its host's IP when known, else the host."""
        host = host_of(url)
        ip = self._politeness.cached_ip(host) if self._politeness is not None else None
        return ip or host

    async def _fetch(self, url: str, held: str | None = None) -> Response | None:
        """``_download`` in the IP's turn (``Turns``): ``held`` when the caller holds it."""
        key = held
        if key is None:
            key = self._turn_key(url)
            await maybe_deferred_to_future(self._turns.take(key))
        try:
            if stopping(self.crawler):
                raise CrawlStopping("the crawl is stopping")
            return cast("Response | None", await self._download(url))  # (no lease: no str)
        finally:
            self._turns.give(key)

    async def _download(
        self, url: str, lease: dict[str, Any] | None = None
    ) -> Response | str | None:
        """The file at ``url`` (None: not to be had, counted). ``lease``: the meta of a fetch
        on a page's lease, whose rules were checked by the caller; it follows no redirect
        (the target's rules are not in hand): the target URL is returned, to fetch in turn."""
        if self._mark is not None:
            self._mark(fingerprint_url(url))
        meta = {M.DOWNLOAD_MAXSIZE: self.max_bytes}
        if lease is not None:
            meta.update(lease, dont_redirect=True)
        shared = None if self._frontier is None else self._frontier.sitemaps
        try:
            request = Request(url, callback=NO_CALLBACK, meta=meta)
            if shared is not None:  # Redis workers: under the IP's shared lease, as a page
                request.meta[M.LEASE] = request.meta[M.IP] = await shared.take_ip(url)
            response = await self.crawler.engine.download_async(request)
        except CrawlStopping:
            raise
        except IgnoreRequest:
            return None
        except Exception as exc:  # a dead host, a reset: counted like any failed fetch
            self.stats.inc_value("larbin/sitemaps/failed")
            logger.debug("Sitemap %s unavailable: %s", url, exc)
            return None
        if lease is not None and response.status in _REDIRECTS:
            target = urljoin(
                response.url, (response.headers.get("Location") or b"").decode("latin-1")
            )
            if target.startswith(("http://", "https://")):
                return target
        if response.status != HTTPStatus.OK:
            self._missing(url, f"HTTP {response.status}")
            return None
        return response

    def _missing(self, url: str, why: str) -> None:
        self.stats.inc_value("larbin/sitemaps/missing")
        logger.debug("No sitemap at %s: %s", url, why)

    def _broken(self, url: str, exc: BrokenSitemap) -> None:
        self.stats.inc_value(f"larbin/sitemaps/{exc.reason}")
        if not self._logged_broken:
            self._logged_broken = True
            logger.warning(
                "Unreadable sitemap %s: %s (further ones are counted in larbin/sitemaps/broken)",
                url,
                exc,
            )

    def _queue(self, response: Response, entries: list[dict[str, Any]]) -> None:
        hints = {e["loc"]: (e.get("changefreq"), e.get("lastmod")) for e in entries}
        self.stats.inc_value("larbin/sitemaps/urls", len(hints))
        if self._admission is None:
            return
        now = time.time()
        engine = self.crawler.engine
        for request in list(self._admission.admit(source_of(response), list(hints))):
            if self.priority:
                request.meta[M.PRIORITY] = True
            hint = sitemap_hint(*hints.get(request.url, (None, None)), now)
            if hint is not None:
                request.meta[M.REVISIT_HINT] = hint
            self.stats.inc_value("larbin/sitemaps/queued")
            engine.crawl(request)
