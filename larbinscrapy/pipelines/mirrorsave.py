"""Save pages as a mirror of each site's URL tree (larbin ``MIRROR_SAVE``), never outside its
directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_to_bytes, urlsplit

import xxhash
from scrapy.exceptions import NotConfigured

from larbinscrapy.items import storable

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

MAX_NAME = 200
MAX_DEPTH = 32
MAX_PATH = 1024
DIRECTORY_FILE = "index.html"
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~=&+,")
_ESCAPES = [chr(b) if b in _SAFE else f"%{b:02X}" for b in range(256)]
_DEFAULT_PORTS = {"http": 80, "https": 443}


def escape_name(raw: bytes) -> str:
    """One safe, ASCII file name for arbitrary bytes, at most ``MAX_NAME`` bytes long."""
    name = "".join(_ESCAPES[b] for b in raw)
    if not name.strip("."):
        name = name.replace(".", "%2E")
    return shorten(name)


def shorten(name: str) -> str:
    if len(name) <= MAX_NAME:
        return name
    return f"{name[: MAX_NAME - 17]}~{xxhash.xxh3_64_hexdigest(name.encode())}"


def _segment_bytes(segment: str) -> bytes:
    return unquote_to_bytes(segment.encode("utf-8", "surrogatepass"))


def mirror_path(url: str) -> str:
    """The relative path a page is mirrored to; ``ValueError`` if the URL has no usable host."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        raise ValueError(f"not an http(s) URL: {url!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"no host in {url!r}")
    port = parts.port  # ValueError for a bad port
    host_name = escape_name(host.encode("utf-8", "surrogatepass"))
    if port is not None and port != _DEFAULT_PORTS[parts.scheme.lower()]:
        host_name = shorten(f"{host_name}_{port}")

    names: list[str] = []
    raw_segments = parts.path.split("/")
    is_directory = True
    for segment in raw_segments:
        decoded = _segment_bytes(segment)
        is_directory = decoded in (b"", b".", b"..")
        if decoded == b"..":
            if names:
                names.pop()
        elif not is_directory:
            names.append(escape_name(decoded))
    if is_directory:
        names.append(DIRECTORY_FILE)
    if parts.query:
        query = parts.query.encode("utf-8", "surrogatepass")
        names[-1] = shorten(f"{names[-1]}@q={''.join(_ESCAPES[b] for b in query)}")

    if len(names) > MAX_DEPTH or sum(len(n) + 1 for n in names) > MAX_PATH:
        names = ["%long", xxhash.xxh3_128_hexdigest("/".join(names).encode())]
    return "/".join([host_name, *names])


def is_inside(path: str | os.PathLike[str], root: str) -> bool:
    """Whether ``path`` resolves (symlinks included) to somewhere under ``root``."""
    real_root = os.path.realpath(root)
    return os.path.realpath(path).startswith(real_root.rstrip(os.sep) + os.sep)


class MirrorSavePipeline:
    """Writes each page body to ``<root>/<mirror_path(url)>`` (larbin MIRROR_SAVE)."""

    content_types = ("*",)  # an archive keeps every type: larbin checkType stops none

    def __init__(self, directory: str, stats: StatsCollector | None = None) -> None:
        self.root = Path(directory)
        self.stats = stats
        self._logged: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> MirrorSavePipeline:
        settings = crawler.settings
        if not settings.getbool("LARBIN_MIRROR_SAVE"):
            raise NotConfigured  # bare: Scrapy logs a warning for one with a message
        return cls(settings["LARBIN_MIRROR_DIR"], stats=crawler.stats)

    def open_spider(self, spider: Any = None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if item.get("changed") is False:  # a revisit of a page already stored (LARBIN_REVISIT)
            self._inc("unchanged")
            return item
        body = item.get("body")
        if body is None:
            self._inc("nobody")
            return item
        if not storable(item):  # the page asked for noindex (LARBIN_OBEY_NOINDEX)
            self._inc("noindex")
            return item
        url = item.get("url") or ""
        try:
            relative = mirror_path(url)
        except ValueError as exc:
            self._skip("unmappable", "mirrorsave: cannot map %s: %s", url, exc)
            return item
        target = self._prepare(relative.split("/"))
        if target is None:
            self._skip("refused", "mirrorsave: %s would be written outside %s", url, self.root)
            return item
        target.write_bytes(body)
        self._inc("saved")
        return item

    def _prepare(self, names: list[str]) -> Path | None:
        """Create the parent directories, resolving file/directory clashes; ``None`` if any
        step would leave the root."""
        root = str(self.root)
        current = self.root
        for name in names[:-1]:
            current = current / name
            if not is_inside(current, root):
                return None
            if current.is_file():  # stored as a page before it turned out to be a directory
                moved = current.with_name(name + "%tmp")
                os.replace(current, moved)
                current.mkdir()
                os.replace(moved, current / DIRECTORY_FILE)
            elif not current.is_dir():
                current.mkdir()
        target = current / names[-1]
        if target.is_dir():
            target = target / DIRECTORY_FILE
        return target if is_inside(target, root) else None

    def _skip(self, event: str, message: str, *args: Any) -> None:
        self._inc(event)
        if event not in self._logged:  # log the first one, count them all
            self._logged.add(event)
            logger.warning(message, *args)

    def _inc(self, event: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"larbin/mirrorsave/{event}")
