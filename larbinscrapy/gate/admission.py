"""larbin's ``check()`` in order, the gate's core: a page's links become Requests only after the
URL filters, the cheap seen test and the trap budgets, in that order.

One ``Admission`` a crawl, built by the link gate (``LinkGateMiddleware``, the
``AdmissionProvider``) and found by the sitemap reader with ``admission_of(crawler)``: both
admit through the same filters, seen cache and per-site budgets. It builds each Request with
the class it is given (``lean.request.request_class``) and hands it to the referer policy it is
given; it reads no setting and holds no crawler. Stats: ``larbin/filtered/<reason>``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scrapy import Request

from larbinscrapy import meta as M
from larbinscrapy.gate.urlfilter import DEPTH, INVALID, UrlFilter
from larbinscrapy.parse.urls import host_of

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Iterator

    from larbinscrapy.gate.seencache import SeenLinks
    from larbinscrapy.gate.traps import TrapGuard

__all__ = [
    "Admission",
    "AdmissionProvider",
    "LinkSource",
    "admission_of",
    "source_of",
    "spider_errback",
    "spider_url_filter",
]


@runtime_checkable
class FilteringSpider(Protocol):
    """A spider with its own URL filter (the ``larbin`` spider: its ``-a`` arguments)."""

    url_filter: UrlFilter | None


@runtime_checkable
class ErrbackSpider(Protocol):
    """A spider whose ``on_error`` is the errback of the requests larbinscrapy builds for it."""

    def on_error(self, failure: Any) -> Any:
        """Called with the failure of a request built for the spider."""


def spider_url_filter(spider: object) -> UrlFilter | None:
    """The spider's own URL filter, if it declares one."""
    return spider.url_filter if isinstance(spider, FilteringSpider) else None


def spider_errback(spider: object) -> Callable[[Any], Any] | None:
    """The errback of the requests built for ``spider`` (its ``on_error``), if it has one."""
    return spider.on_error if isinstance(spider, ErrbackSpider) else None


@dataclass(frozen=True, slots=True)
class LinkSource:
    """The page whose links are admitted, as far as the checks need it."""

    url: str
    depth: int  # Scrapy's ``depth`` of the page
    site_depth: int  # its depth inside its own site (``meta.SITE_DEPTH``)
    parent: Hashable | None = None  # its frontier record: children are counted against it
    origin: Any = None  # the page's Response, handed to the referer policy


def source_of(response: Any) -> LinkSource:
    """The ``LinkSource`` of a Scrapy response (its URL and meta: depth, site depth, record)."""
    meta = response.meta
    return LinkSource(
        response.url, meta.get("depth", 0), meta.get(M.SITE_DEPTH, 0), meta.get(M.RID), response
    )


class Admission:
    """The order of the admission checks, for a page's links and for a single Request."""

    def __init__(
        self,
        url_filter: UrlFilter,
        depth_limit: int,
        stats: Any,
        traps: TrapGuard | None = None,
        request_cls: type[Request] = Request,
    ) -> None:
        self.url_filter = url_filter  # the spider's own filter replaces it (``connect``)
        self.depth_limit = depth_limit
        self.stats = stats
        self._trap = traps.reason if traps is not None and traps.enabled else None
        self._request_cls = request_cls
        self.links_seen: SeenLinks | None = None  # raw-link cache, fingerprint, seen-set
        self._count_seen: Callable[[int], None] | None = None
        self.errback: Callable[[Any], Any] | None = None
        self._referer: Callable[[Request, Any], Any] | None = None

    def connect(
        self,
        *,
        url_filter: UrlFilter | None,
        links_seen: SeenLinks | None,
        count_seen: Callable[[int], None] | None,
        errback: Callable[[Any], Any] | None,
        referer: Callable[[Request, Any], Any] | None,
    ) -> None:
        """At ``spider_opened``: the spider's filter and errback, the crawl's seen test, the
        referer policy (called with each Request and the page's ``origin``)."""
        self.url_filter = url_filter or self.url_filter
        self.links_seen, self._count_seen = links_seen, count_seen
        self.errback, self._referer = errback, referer

    def allow(self, request: Request, source: LinkSource | None) -> bool:
        """A Request the spider built itself: the URL filters and the depth limit only."""
        meta = request.meta
        origin = host_of(source.url) if source is not None else None
        host = host_of(request.url)
        site_depth = meta.get(M.SITE_DEPTH)
        if site_depth is None:
            parent = source.site_depth if source is not None else -1
            site_depth = meta[M.SITE_DEPTH] = parent + 1 if host == origin else 0
        reason = self.url_filter.reason(request.url, host, site_depth, origin)
        if reason is None and self.depth_limit and meta.get("depth", 0) > self.depth_limit:
            reason = DEPTH
        if reason is not None:
            self.stats.inc_value(f"larbin/filtered/{reason}")
            return False
        if source is not None and source.parent is not None:
            meta[M.PARENT] = source.parent
        if self._referer is not None:
            self._referer(request, source.origin if source is not None else None)
        return True

    def admit(self, source: LinkSource, links: Iterable[Any]) -> Iterator[Request]:
        """Requests for the ``links`` of ``source`` that pass the checks, one at a time.

        A page's links never all exist as Requests at once: the scheduler takes each before
        the next is built (a list of them all blew up the memory on link-heavy pages).
        """
        depth = source.depth + 1
        if self.depth_limit and depth > self.depth_limit:
            self.stats.inc_value(f"larbin/filtered/{DEPTH}", sum(1 for _ in links))
            return
        filtered: Counter[str] = Counter()
        seen = [0]
        try:
            yield from self._admit(source, links, depth, filtered, seen)
        finally:  # also when the consumer stops early: every link handled is counted
            for reason, n in filtered.items():
                self.stats.inc_value(f"larbin/filtered/{reason}", n)
            if seen[0] and self._count_seen is not None:
                self._count_seen(seen[0])

    def _admit(
        self,
        source: LinkSource,
        links: Iterable[Any],
        depth: int,
        filtered: Counter[str],
        seen: list[int],
    ) -> Iterator[Request]:
        """The per-link loop of ``admit``: cheap tests first, a Request only at the end."""
        origin, reason_of, trap = host_of(source.url), self.url_filter.reason, self._trap
        links_seen = self.links_seen
        known = links_seen.known if links_seen is not None and links_seen.size else None
        # What a known link can still be filtered for depends only on whether it stays on
        # this page's host: two answers a page, not one call a link.
        same_host = self.url_filter.context_reason(origin, source.site_depth + 1, origin)
        other_host = self.url_filter.context_reason("/", 0, origin)  # "/": no host's name
        for url in links:
            if type(url) is not str:  # a user's item may carry anything: never a traceback
                filtered[INVALID] += 1
                continue
            host = known(url) if known is not None else None
            if host is not None:  # met recently: passed the URL-only filters, and seen
                reason = same_host if host == origin else other_host
            else:
                host = host_of(url)
                site_depth = source.site_depth + 1 if host == origin else 0
                reason = reason_of(url, host, site_depth, origin)
                if reason is None and links_seen is not None and links_seen.seen(url, host):
                    host = None  # seen: counted below
                elif reason is None and trap is not None:
                    reason = trap(url)
                if reason is None and host is not None:
                    request = self._request(url, depth, site_depth, source, links_seen)
                    if request is not None:
                        yield request
                        continue
                    reason = INVALID
            if reason is None:
                seen[0] += 1
            else:
                filtered[reason] += 1

    def _request(
        self,
        url: str,
        depth: int,
        site_depth: int,
        source: LinkSource,
        links_seen: SeenLinks | None,
    ) -> Request | None:
        """The Request of an admitted link; None when ``Request()`` refuses the URL."""
        meta: dict[str, Any] = {}
        if links_seen is not None:  # marked seen: its bit stays off the disk until it is queued
            links_seen.hold()
            meta = {M.ADMITTED: url, M.HELD: True}
        if source.parent is not None:
            meta[M.PARENT] = source.parent
        meta.update({"depth": depth, M.SITE_DEPTH: site_depth, M.REFERER: source.url})
        try:
            request = self._request_cls(url, errback=self.errback, meta=meta)
        except ValueError:  # is_valid_url() let it through: still this link only
            return None
        if self._referer is not None:
            self._referer(request, source.origin)
        return request


class AdmissionProvider:
    """Base of the component that builds the crawl's ``Admission`` (the link gate)."""

    admission: Admission


def admission_of(crawler: Any) -> Admission | None:
    """The crawl's ``Admission``, or None without an engine or without a link gate."""
    try:
        provider = crawler.get_spider_middleware(AdmissionProvider)
    except RuntimeError:  # no engine: a component built on its own (unit tests)
        return None
    return None if provider is None else provider.admission
