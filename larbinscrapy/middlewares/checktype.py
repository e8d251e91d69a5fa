"""larbin's ``checkType``: a page that is not HTML is not downloaded past its headers; bounded
decompression with bombs counted (the media-type rules: ``larbinscrapy.fetch.checktype``)."""

from __future__ import annotations

import logging
import mimetypes
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http.request import NO_CALLBACK

from larbinscrapy.exceptions import DroppedRequest
from larbinscrapy.fetch.checktype import (
    BOMB,
    CONTENT_TYPE,
    HTML_TYPES,
    AsksContentTypes,
    media_type,
    parse_content_types,
)
from larbinscrapy.gate.urlfilter import parse_extensions
from larbinscrapy.meta import ANY_TYPE
from larbinscrapy.parse.urls import extension_of

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Headers, Response

logger = logging.getLogger(__name__)


class ContentTypeMiddleware:
    """larbin's checkType (see the module docstring)."""

    def __init__(
        self,
        stats: Any,
        wanted: tuple[str, ...],
        extensions: frozenset[str],
        crawler: Crawler | None = None,
    ) -> None:
        self.stats = stats
        self._crawler = crawler  # at engine start: the pipelines and the spider that ask
        self.extensions = extensions
        self._set_wanted(wanted)
        self._logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ContentTypeMiddleware:
        s = crawler.settings
        extensions = parse_extensions(s.get("LARBIN_FRONTIER_PRIORITY_EXTENSIONS") or "")
        types = [t for t in map(mimetypes.types_map.get, sorted(extensions)) if t]
        wanted = parse_content_types(s.get("LARBIN_FETCH_CONTENT_TYPES") or "")
        mw = cls(crawler.stats, (*wanted, *parse_content_types(types)), extensions, crawler)
        crawler.signals.connect(mw.headers_received, signal=signals.headers_received)
        crawler.signals.connect(mw.engine_started, signal=signals.engine_started)
        return mw

    def _set_wanted(self, wanted: Iterable[str]) -> None:
        self.wanted = tuple(dict.fromkeys(wanted))
        self._any = "*" in self.wanted
        self._exact = frozenset(t for t in self.wanted if not t.endswith("/"))
        self._prefixes = tuple(t for t in self.wanted if t.endswith("/"))

    def engine_started(self) -> None:
        """Add the types the item pipelines and the spider ask for (``content_types``)."""
        if self._crawler is None:
            return
        components = [*self._crawler.engine.scraper.itemproc.middlewares, self._crawler.spider]
        asked = [t for c in components if isinstance(c, AsksContentTypes) for t in c.content_types]
        if asked:
            self._set_wanted((*self.wanted, *parse_content_types(asked)))

    def unwanted(self, request: Request, headers: Headers) -> str | None:
        """The media type of an answer not to download, or None to download it."""
        if self._any or request.callback is NO_CALLBACK:
            return None
        ctype = media_type(headers.get(b"Content-Type"))
        if ctype in HTML_TYPES or ctype in self._exact or ctype.startswith(self._prefixes or "\0"):
            return None
        if request.meta.get(ANY_TYPE):
            return None
        if self.extensions and extension_of(request.url) in self.extensions:
            return None
        return ctype

    def headers_received(
        self, headers: Headers, body_length: int, request: Request, spider: Any = None
    ) -> None:
        # The status is not known here; a redirect or an error page stopped at its headers
        # loses only a body nobody reads, and process_response lets it through.
        if self.unwanted(request, headers) is not None:
            raise StopDownload(fail=False)

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        ok = HTTPStatus.OK <= response.status < HTTPStatus.MULTIPLE_CHOICES
        if "download_stopped" not in response.flags or not ok:
            return response
        ctype = self.unwanted(request, response.headers)
        if ctype is None:
            return response
        self.stats.inc_value(f"larbin/dropped/{CONTENT_TYPE}")
        if not self._logged:
            self._logged = True
            logger.info(
                "Not downloading %s: Content-Type %s is not HTML (larbin checkType; "
                "LARBIN_FETCH_CONTENT_TYPES keeps a type; larbin/dropped/content_type counts them)",
                request.url,
                ctype,
            )
        raise DroppedRequest(CONTENT_TYPE, ctype)


class BoundedDecompressionMiddleware(HttpCompressionMiddleware):
    """Scrapy's decompression, its over-``DOWNLOAD_MAXSIZE`` refusal counted as a drop reason."""

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        try:
            return super().process_response(request, response)
        except IgnoreRequest as exc:  # raised for one thing only: the inflated size
            if self.stats is not None:
                self.stats.inc_value(f"larbin/dropped/{BOMB}")
            raise DroppedRequest(BOMB, str(exc)) from exc
