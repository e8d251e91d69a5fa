"""The ``larbin`` spider: a broad crawl from seeds, one ``PageItem`` per fetched page."""

from __future__ import annotations

import asyncio
import difflib
import logging
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import is_asyncio_available
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from larbinscrapy import meta as M
from larbinscrapy import signals as larbin_signals
from larbinscrapy.conf import check as config
from larbinscrapy.conf.defaults import SETTINGS
from larbinscrapy.fatal import retrieve_task_exception
from larbinscrapy.frontier import dnsfailed
from larbinscrapy.gate.urlfilter import PAGE_LINKS, UrlFilter, parse_domains
from larbinscrapy.items import PageItem
from larbinscrapy.parse.links import extract, robots_directives
from larbinscrapy.politeness import contact, failures
from larbinscrapy.reactor import installed_reactor
from larbinscrapy.seeds.seedlist import (
    Seeds,
    SeedsError,
    parse_lines,
    parse_url_list,
    read_seeds_file,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_HTML_TYPES = (b"text/html", b"application/xhtml+xml", b"")
# Seeds queued between two turns of the reactor. Scrapy's engine reads start() without a pause
# while its downloader is full, and queueing a seed never waits: a million seeds held the
# reactor long enough for DNS answers to be dropped at the socket and for every download in
# flight to time out at once (benchmarks/RESULTS.md, issue 35's million-host run of 2026-12-06).
SEEDS_A_TURN = 100
_PACKAGE_PREFIX = "package:"  # -a seeds=package:larbinscrapy/seedlists/FILE
ARGUMENTS = ("seeds", "urls", "depth", "domains", "external", "images", "retry")
RETRY = ("dns",)  # what -a retry= asks for again  # what -a takes


class SpiderArgumentError(ValueError):
    """A ``-a`` argument the spider cannot use (``-a depth=x``, ``-a external=maybe``)."""


def parse_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise SpiderArgumentError(f"-a {name}= takes true or false, got {value!r}")


def parse_depth(value: Any) -> int | None:
    if value is None or isinstance(value, int):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise SpiderArgumentError(f"-a depth= takes an integer, got {value!r}") from None


def parse_retry(value: Any, jobdir: str) -> bool:
    """``-a retry=dns``: ask again for the URLs dropped for DNS, kept in ``JOBDIR``."""
    if value is None:
        return False
    if str(value).strip().lower() not in RETRY:
        raise SpiderArgumentError(f"-a retry= takes {', '.join(RETRY)}, got {value!r}")
    if not jobdir:
        raise SpiderArgumentError(
            "-a retry=dns needs the JOBDIR of the crawl whose DNS failed "
            "(-s JOBDIR=DIR): the URLs are kept there"
        )
    return True


def check_arguments(kwargs: dict[str, Any]) -> None:
    """Refuse an ``-a`` name the spider does not take (a typo would silently change nothing).

    Names starting with ``_`` are let through: scrapyd passes ``-a _job=ID`` to every job.
    """
    for name, value in kwargs.items():
        if not name.startswith("_"):
            close = difflib.get_close_matches(name, ARGUMENTS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SpiderArgumentError(
                f"unknown argument -a {name}={value}{hint}; the larbin spider takes "
                + ", ".join(f"-a {a}=" for a in ARGUMENTS)
            )


class LarbinSpider(Spider):
    """Broad crawl from seeds (see the module docstring for the arguments)."""

    name = "larbin"
    obey_nofollow: bool  # LARBIN_OBEY_NOFOLLOW
    obey_noindex: bool  # LARBIN_OBEY_NOINDEX
    robots_names: tuple[str, ...]  # <meta name=...> values that speak to us: robots, BOT_NAME
    content_types: tuple[str, ...]  # what checktype.py downloads for us besides HTML
    max_links: int  # LARBIN_LINKS_PER_PAGE_MAX (0: no cap)
    images: bool  # -a images / LARBIN_IMAGES
    url_filter: UrlFilter  # the link gate takes it at spider_opened

    def __init__(
        self,
        *args: Any,
        seeds: str | None = None,
        urls: str | None = None,
        depth: str | None = None,
        domains: str | None = None,
        external: str | None = None,
        images: str | None = None,
        retry: str | None = None,
        **kwargs: Any,
    ) -> None:
        check_arguments(kwargs)
        super().__init__(*args, **kwargs)
        self.seeds_arg = seeds
        self.urls_arg = urls
        self.depth_arg = parse_depth(depth)
        self.domains_arg = domains
        self.external_arg = parse_bool("external", external)
        self.images_arg = parse_bool("images", images)
        self.retry_arg = retry
        self.retry_urls: list[str] = []  # -a retry=dns: the URLs dropped for DNS before
        self.seed_urls: list[str] = []
        self.seed_errors = 0
        self._capped_logged = False

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """larbin's feed fields (no body, no headers) for this spider's crawls only, unless the
        project chose its own: the add-on leaves a project's other spiders every field."""
        super().update_settings(settings)
        if settings.get("FEED_EXPORT_FIELDS") is None:  # (addon: Scrapy copies the process's
            settings.set(
                "FEED_EXPORT_FIELDS",  # default-priority settings over this one)
                list(SETTINGS["FEED_EXPORT_FIELDS"].default),
                priority="addon",
            )

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> LarbinSpider:
        try:
            return cls._from_crawler(crawler, *args, **kwargs)
        except (SeedsError, SpiderArgumentError, config.SettingsError) as exc:
            # A user's mistake, not a bug: one line, no traceback, and the crawl still fails
            # (Scrapy exits 1 when the spider cannot be created).
            logger.error("larbin: %s", exc)
            retrieve_task_exception()
            raise

    @classmethod
    def _from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> LarbinSpider:
        # Scrapy builds the spider before a crawler's add-ons run: a crawler made without a
        # crawler process (no LarbinAddon.update_pre_crawler_settings) gets here unchecked.
        config.check(crawler.settings)
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.images = (
            spider.images_arg if spider.images_arg is not None else s.getbool("LARBIN_IMAGES")
        )
        spider.content_types = ("image/",) if spider.images else ()  # checktype.py downloads them
        spider.obey_nofollow = s.getbool("LARBIN_OBEY_NOFOLLOW")
        spider.obey_noindex = s.getbool("LARBIN_OBEY_NOINDEX")
        spider.max_links = s.getint("LARBIN_LINKS_PER_PAGE_MAX")
        spider.robots_names = ("robots", str(s.get("BOT_NAME")).lower())
        spider.url_filter = UrlFilter.from_settings(
            s,
            max_depth=spider.depth_arg,
            external=spider.external_arg,
            domains=None if spider.domains_arg is None else parse_domains(spider.domains_arg),
        )
        if parse_retry(spider.retry_arg, s.get("JOBDIR") or ""):
            spider.retry_urls = spider.take_retries(s.get("JOBDIR"))
        spider.seed_urls = spider.load_seeds(
            spider.seeds_arg or s.get("LARBIN_SEEDS") or "",
            spider.urls_arg or s.get("LARBIN_URLS") or "",
        )
        return spider

    def take_retries(self, jobdir: str) -> list[str]:
        """The URLs dropped for DNS in ``jobdir`` (frontier/dnsfailed.py), before the
        scheduler opens (it appends there); ``SeedsError`` if they cannot be read."""
        try:
            return dnsfailed.take(jobdir)
        except OSError as exc:
            raise SeedsError(
                f"-a retry=dns cannot read the URLs dropped for DNS in {jobdir}: "
                f"{exc.strerror or exc}"
            ) from None

    def load_seeds(self, path: str, urls: str) -> list[str]:
        """Seeds from the file and/or the list; bad lines logged and skipped; none is fatal."""
        found = Seeds()
        limit = self.crawler.settings.getint("URLLENGTH_LIMIT")
        if path:
            found = _read_seeds(path, limit)  # SeedsError: missing or unreadable
        if urls:
            more = parse_url_list(urls, limit)
            found.urls += [u for u in more.urls if u not in found.urls]
            found.errors += more.errors
        for error in found.errors:
            logger.warning("Skipping bad seed: %s", error)
        self.seed_errors = len(found.errors)
        if (
            not found.urls
            and not self.crawler.settings.getbool("LARBIN_ALLOW_NO_SEEDS")
            and (
                type(self).start is _OWN_START  # else a command starts it (scrapy parse)
                and self.retry_arg is None
            )
        ):  # -a retry=dns alone: the URLs dropped for DNS
            if not (path or urls):
                raise SeedsError("no seeds: pass -a seeds=FILE or -a urls=URL,URL")
            where = " or ".join(w for w in (path, urls and "-a urls") if w)
            raise SeedsError(f"no valid seed URL in {where}")
        return found.urls

    async def start(self) -> AsyncIterator[Any]:
        stats = self.crawler.stats
        stats.set_value("larbin/seeds/valid", len(self.seed_urls))
        if self.seed_errors:
            stats.set_value("larbin/seeds/invalid", self.seed_errors)
        s = self.crawler.settings
        if contact.missing(s.get("USER_AGENT") or "", s.get("LARBIN_FROM") or "", self.seed_urls):
            logger.warning(contact.HINT)
        # each seed is let go once queued: a list of millions is not held for the whole crawl
        seeds, self.seed_urls = self.seed_urls, []
        seeds.reverse()
        queued = 0
        while seeds:
            yield Request(seeds.pop(), errback=self.on_error, meta=M.seed_meta())
            queued += 1
            if queued % SEEDS_A_TURN == 0:
                await _a_turn()
        if self.retry_arg is not None:
            stats.inc_value("larbin/seeds/retried_dns", len(self.retry_urls))  # a count
            logger.info(
                "larbin: -a retry=dns: re-queuing %d URL(s) whose host's DNS failed "
                "(JOBDIR %s), past the seen-set",
                len(self.retry_urls),
                s.get("JOBDIR"),
            )
        for queued, url in enumerate(self.retry_urls, 1):  # seen before: dont_filter
            yield Request(url, errback=self.on_error, meta=M.seed_meta(), dont_filter=True)
            if queued % SEEDS_A_TURN == 0:
                await _a_turn()

    def closed(self, reason: str) -> None:
        """The retried URLs are in the frontier's files now (it closed first): forget them,
        unless a fatal error stopped the writes (they are asked for again next time)."""
        jobdir = self.crawler.settings.get("JOBDIR")
        if self.retry_urls and jobdir and self.crawler.stats.get_value("larbin/fatal") is None:
            dnsfailed.retried(jobdir)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        headers = response.headers
        ctype = (headers.get(b"Content-Type") or b"").split(b";", 1)[0].strip().lower()
        body = response.body
        item = PageItem(
            url=response.url,
            status=response.status,
            depth=response.meta.get("depth", 0),
            referer=response.meta.get(M.REFERER),
            fetched_at=datetime.now(UTC).isoformat(timespec="seconds"),
            content_type=ctype.decode("latin-1"),
            length=len(body),
            ip=response.meta.get(M.IP),
            body=body,
            headers=_headers(headers),
            title=None,
            keywords=None,
            description=None,
            links=[],
            noindex=False,
            canonical=None,
        )
        robots = frozenset().union(
            *(
                robots_directives(v.decode("latin-1"), self.robots_names)
                for v in headers.getlist(b"X-Robots-Tag")
            )
        )
        if (count := response.meta.get(M.FETCH_COUNT)) is not None:  # LARBIN_REVISIT
            item["fetch_count"], item["changed"] = count, response.meta.get(M.CHANGED)
        if ctype in _HTML_TYPES and body:
            robots = self._read_html(item, body, headers.get(b"Content-Type"), robots)
        item["noindex"] = self.obey_noindex and "noindex" in robots
        yield item

    def _read_html(
        self, item: PageItem, body: bytes, content_type: bytes | None, robots: frozenset[str]
    ) -> frozenset[str]:
        """Fill ``item`` from the page's HTML; return ``robots`` with the page's own directives.

        A method of its own so the parser's whole output (every link of a 100,000-link page)
        is freed when it returns, not held by ``parse`` while it waits at ``yield item``.
        """
        page = extract(
            body,
            item["url"],
            images=self.images,
            encoding=_charset(content_type),
            robots_names=self.robots_names,
        )
        item["title"], item["keywords"] = page.title, page.keywords
        item["description"], item["canonical"] = page.description, page.canonical
        item["links"] = page.links if self.obey_nofollow else [*page.links, *page.nofollow]
        robots |= page.robots
        unfollowed = len(page.nofollow) if self.obey_nofollow else 0
        if self.obey_nofollow and "nofollow" in robots:
            unfollowed += len(item["links"])
            item["links"] = []
        if unfollowed:
            self.crawler.stats.inc_value("larbin/filtered/nofollow", unfollowed)
        if self.max_links and len(item["links"]) > self.max_links:
            self._cap_links(item)
        return robots

    def _cap_links(self, item: PageItem) -> None:
        """Keep the first ``max_links`` links (larbin capped links per page too).

        Bounds what one response costs downstream: the item's ``links`` in feeds and
        pipelines, and the link gate's work: without it a few link-heavy pages at once take the
        crawl past the RSS limit of tests/test_hostile_memory.py.
        """
        links = item["links"]
        over = len(links) - self.max_links
        if not self._capped_logged:
            self._capped_logged = True
            logger.info(
                "Keeping the first %d of %d links of %s (LARBIN_LINKS_PER_PAGE_MAX; "
                "larbin/filtered/%s counts the rest)",
                self.max_links,
                len(links),
                item["url"],
                PAGE_LINKS,
            )
        self.crawler.stats.inc_value(f"larbin/filtered/{PAGE_LINKS}", over)
        item["links"] = links[: self.max_links]

    def on_error(self, failure: Failure) -> None:
        """Download failures are counted (politeness and robots middlewares) and end here."""
        request = failure.request  # type: ignore[attr-defined]
        if not failure.check(IgnoreRequest):
            logger.debug("Fetch of %s failed: %s", request.url, failure.getErrorMessage())
            self.crawler.stats.inc_value(f"larbin/failed/{type(failure.value).__name__}")
            kind = failures.classify(failure.value)  # retries are over: the URL is dropped
            if kind is not None:
                self.crawler.stats.inc_value(f"larbin/dropped/{kind}")
        # Once per request: an error status (HttpError) already went through the link gate's
        # process_spider_exception, which sent it.
        if not request.meta.get(M.OUTPUT_DONE):
            request.meta[M.OUTPUT_DONE] = True
            self.crawler.signals.send_catch_log(
                larbin_signals.request_done, request=request, children=0
            )


# ``scrapy parse`` replaces the class's ``start`` with its own (the URL given): no seeds needed.
_OWN_START = LarbinSpider.start


async def _a_turn() -> None:
    """Let the reactor run once (its sockets read, its timers fired) before going on."""
    if is_asyncio_available():
        await asyncio.sleep(0)
    else:
        turn: Deferred[None] = Deferred()
        installed_reactor().callLater(0, turn.callback, None)
        await maybe_deferred_to_future(turn)


def _headers(headers: Any) -> dict[str, str]:
    """Response headers as ``{name: value}``; repeated headers joined with ", " (RFC 9110).

    ``dict.items`` reads Scrapy's ``Headers`` storage directly (normalised names, lists of
    values): its own ``items()`` normalises and copies every key again.
    """
    return {
        name.decode("latin-1"): b", ".join(values).decode("latin-1")
        for name, values in dict.items(headers)
    }


def _read_seeds(path: str, max_length: int = 0) -> Seeds:
    """A seeds file on this host, or ``package:PACKAGE/FILE`` inside the deployed code.

    The second is for scrapyd, whose host cannot read the client's files: a seeds file placed
    in ``larbinscrapy/seedlists/`` ships in the egg (docs/scrapyd.md).
    """
    if not path.startswith(_PACKAGE_PREFIX):
        return read_seeds_file(path, max_length)
    package, _, name = path.removeprefix(_PACKAGE_PREFIX).partition("/")
    try:
        text = resources.files(package).joinpath(name).read_text(encoding="utf-8-sig")
    except (ImportError, OSError, ValueError) as exc:
        raise SeedsError(f"no seeds file {name!r} in package {package!r} ({exc})") from exc
    return parse_lines(text.splitlines(), path, max_length)


def _charset(content_type: bytes | None) -> str:
    if content_type:
        _, _, params = content_type.partition(b";")
        for param in params.split(b";"):
            key, _, value = param.strip().partition(b"=")
            if key.lower() == b"charset" and value:
                return value.strip(b"\"' ").decode("latin-1")
    return "utf-8"
