"""Write pages to WARC/1.1 files through warcio (the web archive format; not in larbin)."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from datetime import UTC, datetime
from http import HTTPStatus
from importlib.metadata import version
from io import BytesIO
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from w3lib.url import safe_url_string

from larbinscrapy.items import storable

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

logger = logging.getLogger(__name__)

_WARC_1_1_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_WIRE_HEADERS = {"content-length", "content-encoding", "transfer-encoding"}
_NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def _one_line(value: Any) -> str:
    """A header name or value that cannot break the header block."""
    return str(value).replace("\r", " ").replace("\n", " ")


def response_status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


def response_headers(item: Any, body_length: int) -> list[tuple[str, str]]:
    """The response headers to archive: the item's own, or just its Content-Type."""
    headers: list[tuple[str, str]] = []
    given = item.get("headers")
    if given:
        for name, value in given.items():
            if name.lower() in _WIRE_HEADERS:
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            headers.extend((_one_line(name), _one_line(v)) for v in values)
    elif item.get("content_type"):
        headers.append(("Content-Type", str(item["content_type"])))
    headers.append(("Content-Length", str(body_length)))
    return headers


def warc_date(fetched_at: str | None) -> str | None:
    """``fetched_at`` (ISO 8601) as a WARC-Date, or ``None`` to let warcio use now."""
    if not fetched_at:
        return None
    try:
        dt = datetime.fromisoformat(str(fetched_at).replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)
    return dt.isoformat() + "Z"  # warcio's datetime_to_iso_date(dt, use_micros=True)


def _software() -> str:
    """The warcinfo ``software`` field (read from the installed packages' metadata)."""
    return f"larbinscrapy (Scrapy {version('scrapy')}, warcio {version('warcio')})"


class WarcPipeline:
    """Archives each page as WARC request/response records, rotating files by size."""

    content_types = ("*",)  # an archive keeps every type: larbin checkType stops none

    def __init__(
        self,
        directory: str,
        max_size: int = 1_000_000_000,
        prefix: str = "larbin",
        user_agent: str = "",
        robots: str = "obey",
        stats: StatsCollector | None = None,
    ) -> None:
        if max_size < 1:
            raise ValueError("LARBIN_WARC_SIZE_MAX must be positive")
        from warcio.statusandheaders import StatusAndHeaders
        from warcio.warcwriter import WARCWriter

        self._status_and_headers = StatusAndHeaders
        self._writer_class = WARCWriter
        self.root = Path(directory)
        self.max_size = max_size
        self.prefix = prefix
        self.user_agent = user_agent
        self.robots = robots
        self.stats = stats
        self.files: list[Path] = []  # written by this run, in order
        self._file: IO[bytes] | None = None
        self._writer: WARCWriter | None = None
        self._warcinfo_id = ""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> WarcPipeline:
        settings = crawler.settings
        if not settings.getbool("LARBIN_WARC"):
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        return cls(
            directory=settings["LARBIN_WARC_DIR"],
            max_size=settings.getint("LARBIN_WARC_SIZE_MAX"),
            prefix=settings["LARBIN_WARC_PREFIX"],
            user_agent=settings.get("USER_AGENT") or "",
            robots="obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore",
            stats=crawler.stats,
        )

    def open_spider(self, spider: Any = None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def close_spider(self, spider: Any = None) -> None:
        self._close_file()

    def process_item(self, item: Any, spider: Any = None) -> Any:
        body = item.get("body")
        if body is None:
            self._inc("nobody")
            return item
        if not storable(item):  # the page asked for noindex (LARBIN_OBEY_NOINDEX)
            self._inc("noindex")
            return item
        writer = self._writer or self._open_file()
        url = item["url"]
        extra = self._response_headers(item)
        status = int(item.get("status") or 200)
        http_headers = self._status_and_headers(
            response_status_line(status), response_headers(item, len(body)), protocol="HTTP/1.1"
        )
        if item.get("changed") is False:  # a revisit: the archive already holds this payload
            response = self._revisit_record(writer, url, status, body, http_headers, extra)
        else:
            response = writer.create_warc_record(
                url,
                "response",
                payload=BytesIO(body),
                length=len(body),
                warc_headers_dict=extra,
                http_headers=http_headers,
            )
        request = writer.create_warc_record(
            url,
            "request",
            warc_headers_dict={"WARC-Warcinfo-ID": self._warcinfo_id},
            http_headers=self._request_headers(url),
        )
        writer.write_request_response_pair(request, response)
        self._inc("revisit" if response.rec_type == "revisit" else "written")
        if self._file is not None and self._file.tell() >= self.max_size:
            self._close_file()
        return item

    def _response_headers(self, item: Any) -> dict[str, str]:
        """The WARC headers of a response record: its warcinfo, date and IP when known."""
        extra = {"WARC-Warcinfo-ID": self._warcinfo_id}
        date = warc_date(item.get("fetched_at"))
        if date:
            extra["WARC-Date"] = date
        if item.get("ip"):
            extra["WARC-IP-Address"] = str(item["ip"])
        return extra

    @staticmethod
    def _revisit_record(
        writer: WARCWriter,
        url: str,
        status: int,
        body: bytes,
        http_headers: StatusAndHeaders,
        extra: dict[str, str],
    ) -> Any:
        if status == HTTPStatus.NOT_MODIFIED:
            return writer.create_warc_record(
                url,
                "revisit",
                http_headers=http_headers,
                warc_headers_dict={**extra, "WARC-Profile": _NOT_MODIFIED_PROFILE},
            )
        digest = "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")
        record = writer.create_revisit_record(
            url,
            digest,
            url,
            extra.get("WARC-Date", ""),
            http_headers=http_headers,
            warc_headers_dict=extra,
        )
        if not extra.get("WARC-Date"):
            record.rec_headers.remove_header("WARC-Refers-To-Date")
        return record

    def _request_headers(self, url: str) -> StatusAndHeaders:
        parts = urlsplit(safe_url_string(url))  # no space or control byte in the request line
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = [("Host", parts.netloc)]
        if self.user_agent:
            headers.append(("User-Agent", self.user_agent))
        return self._status_and_headers(f"GET {target} HTTP/1.1", headers, is_http_request=True)

    def _open_file(self) -> WARCWriter:
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        serial = len(self.files)
        while True:
            path = self.root / f"{self.prefix}-{stamp}-{serial:05d}.warc.gz"
            try:
                self._file = open(path, "xb")  # noqa: SIM115
                break
            except FileExistsError:
                serial += 1
        self.files.append(path)
        self._writer = self._writer_class(self._file, gzip=True, warc_version="1.1")
        info = self._writer.create_warcinfo_record(
            path.name,
            {
                "software": _software(),
                "format": "WARC File Format 1.1",
                "conformsTo": _WARC_1_1_SPEC,
                "robots": self.robots,
                "http-header-user-agent": self.user_agent,
                "hostname": os.uname().nodename,
            },
        )
        self._warcinfo_id = info.rec_headers.get_header("WARC-Record-ID")
        self._writer.write_record(info)
        self._inc("files")
        logger.info("warc: writing %s", path)
        return self._writer

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._writer = None

    def _inc(self, event: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/warc/{event}")
