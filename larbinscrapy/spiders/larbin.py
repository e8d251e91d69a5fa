"""The ``larbin`` spider: a broad crawl from seeds, one ``PageItem`` per fetched page.

    scrapy crawl larbin -a seeds=seeds.txt [-a urls=u1,u2] [-a depth=5] [-a domains=a.com,b.org]
                        [-a external=false] [-a images=true]

Each argument defaults to its ``LARBIN_*`` setting. The spider only parses: links are turned
into requests by ``LinkGateMiddleware`` (filters, then the seen test), so a page costs one scan
of its bytes (``links.extract``) plus a hash and a bit test per link.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest

from larbinscrapy import signals as larbin_signals
from larbinscrapy.items import PageItem
from larbinscrapy.links import extract
from larbinscrapy.middlewares.filters import url_filter_from_settings
from larbinscrapy.seeds import Seeds, SeedsError, parse_url_list, read_seeds_file
from larbinscrapy.urlfilter import parse_domains

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_HTML_TYPES = (b"text/html", b"application/xhtml+xml", b"")


def parse_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"-a {name}= takes true or false, got {value!r}")


class LarbinSpider(Spider):
    """Broad crawl from seeds (see the module docstring for the arguments)."""

    name = "larbin"

    def __init__(
        self,
        *args: Any,
        seeds: str | None = None,
        urls: str | None = None,
        depth: str | None = None,
        domains: str | None = None,
        external: str | None = None,
        images: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.seeds_arg = seeds
        self.urls_arg = urls
        self.depth_arg = None if depth is None else int(depth)
        self.domains_arg = domains
        self.external_arg = parse_bool("external", external)
        self.images_arg = parse_bool("images", images)
        self.seed_urls: list[str] = []
        self.seed_errors = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> LarbinSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.images = (
            spider.images_arg if spider.images_arg is not None else s.getbool("LARBIN_IMAGES")
        )
        spider.url_filter = url_filter_from_settings(
            s,
            max_depth=spider.depth_arg,
            external=spider.external_arg,
            domains=None if spider.domains_arg is None else parse_domains(spider.domains_arg),
        )
        spider.seed_urls = spider._load_seeds(
            spider.seeds_arg or s.get("LARBIN_SEEDS") or "",
            spider.urls_arg or s.get("LARBIN_URLS") or "",
        )
        return spider

    def _load_seeds(self, path: str, urls: str) -> list[str]:
        """Seeds from the file and/or the list; bad lines logged and skipped; none is fatal."""
        found = Seeds()
        if path:
            found = read_seeds_file(path)  # SeedsError: missing or unreadable
        if urls:
            more = parse_url_list(urls)
            found.urls += [u for u in more.urls if u not in found.urls]
            found.errors += more.errors
        for error in found.errors:
            logger.warning("Skipping bad seed: %s", error)
        self.seed_errors = len(found.errors)
        if not found.urls and not self.crawler.settings.getbool("LARBIN_ALLOW_NO_SEEDS"):
            where = path or "urls" if (path or urls) else None
            raise SeedsError(
                f"no valid seed URL in {where}"
                if where
                else "no seeds: pass -a seeds=FILE or -a urls=URL,URL"
            )
        return found.urls

    async def start(self) -> AsyncIterator[Any]:
        stats = self.crawler.stats
        stats.set_value("larbin/seeds/valid", len(self.seed_urls))
        if self.seed_errors:
            stats.set_value("larbin/seeds/invalid", self.seed_errors)
        for url in self.seed_urls:
            yield Request(url, errback=self.on_error, meta={"depth": 0, "larbin_site_depth": 0})

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        headers = response.headers
        ctype = (headers.get(b"Content-Type") or b"").split(b";", 1)[0].strip().lower()
        body = response.body
        item = PageItem(
            url=response.url,
            status=response.status,
            depth=response.meta.get("depth", 0),
            referer=response.meta.get("larbin_referer"),
            fetched_at=datetime.now(UTC).isoformat(timespec="seconds"),
            content_type=ctype.decode("latin-1"),
            length=len(body),
            ip=response.meta.get("larbin_ip"),
            body=body,
            title=None,
            keywords=None,
            description=None,
            links=[],
        )
        if ctype in _HTML_TYPES and body:
            page = extract(
                body,
                response.url,
                images=self.images,
                encoding=_charset(headers.get(b"Content-Type")),
            )
            item["title"], item["keywords"] = page.title, page.keywords
            item["description"], item["links"] = page.description, page.links
        yield item

    def on_error(self, failure: Failure) -> None:
        """Download failures are counted (politeness and robots middlewares) and end here."""
        request = failure.request  # type: ignore[attr-defined]
        if not failure.check(IgnoreRequest):
            logger.debug("Fetch of %s failed: %s", request.url, failure.getErrorMessage())
            self.crawler.stats.inc_value(f"larbin/failed/{failure.type.__name__}")
        self.crawler.signals.send_catch_log(larbin_signals.request_done, request=request)


def _charset(content_type: bytes | None) -> str:
    if content_type:
        _, _, params = content_type.partition(b";")
        for param in params.split(b";"):
            key, _, value = param.strip().partition(b"=")
            if key.lower() == b"charset" and value:
                return value.strip(b"\"' ").decode("latin-1")
    return "utf-8"
