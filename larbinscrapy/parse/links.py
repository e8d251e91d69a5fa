"""Link, title and meta extraction: larbin's ``html.cc`` tag scanner, as compiled regexes."""

from __future__ import annotations

import html
import logging
import re
from html.entities import html5 as _HTML5_ENTITIES
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

from w3lib.url import safe_url_string

from larbinscrapy.parse.scanner import (
    _ANY_ATTR,
    _ATTR_OF_TAG,
    _HREF,
    _LINK,
    _META_TAG,
    _REL,
    _TITLE,
    SCAN_HTML,
    SCAN_HTML_IMAGES,
    _value,
    scan,
)

logger = logging.getLogger(__name__)

# the scan of a page without foreign content, alone (benchmarks/bench_links.py, tests)
_SCAN, _SCAN_IMAGES = SCAN_HTML, SCAN_HTML_IMAGES

__all__ = ["Page", "extract", "is_safe_url", "robots_directives"]


class Page(NamedTuple):
    """What the parser found in one page."""

    links: list[str]  # absolute http(s) URLs, no fragment, first-seen order, no duplicates
    title: str | None  # <title> text, entities decoded, whitespace collapsed; None if absent/blank
    keywords: str | None  # <meta name="keywords" content>
    description: str | None  # <meta name="description" content>
    robots: frozenset[str] = frozenset()  # <meta name="robots"|our name> directives, lower-case
    canonical: str | None = None  # <link rel="canonical" href>, absolute
    nofollow: tuple[str, ...] = ()  # links with rel="nofollow" (not in ``links``)


_HTML_WS = " \t\n\r\f"
_C0_SPACE = "".join(map(chr, range(0x21)))  # the URL parser strips these around a URL
_TAB_NEWLINE = str.maketrans("", "", "\t\n\r")  # ...and these anywhere in it
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):").match
# An http(s) URL safe_url_string() would return unchanged: lower-case host, a path before any
# query, no empty query, no character it percent-encodes (a quote is fine in the path only).
# A port in it is one safe_url_string accepts (1-65535): a larger one takes the slow path,
# which drops it; no int() a link.
_SAFE_URL = re.compile(
    r"https?://[a-z0-9.\-]+(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}"
    r"|655[0-2][0-9]|6553[0-5]))?"
    r"(?:/[!$%'()*+,\-./0-9:;=@A-Z_a-z~]*(?:\?[!$%&()*+,\-./0-9:;=?@A-Z_a-z~]+)?)?"
).fullmatch
# Character references in attribute values (HTML5: numeric ones may omit ";"; a legacy named
# one without ";" is decoded unless "=" follows, so "?a=1&reg=2" keeps its "&reg").
_CHAR_REF = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|([A-Za-z][A-Za-z0-9]*)(;?))")


def _char_ref(m: re.Match[str]) -> str:
    name = m.group(1)
    if name is None:
        return html.unescape(m.group(0))
    if m.group(2):
        return _HTML5_ENTITIES.get(name + ";", m.group(0))
    string, end = m.string, m.end()
    if end < len(string) and string[end] == "=":
        return m.group(0)
    return _HTML5_ENTITIES.get(name, m.group(0))


def _text(value: str) -> str:
    """Entities decoded and whitespace collapsed, for title and meta content."""
    if "&" in value:
        value = html.unescape(value)
    return " ".join(value.split())


class _Base:
    """A base URL cut into the prefixes that resolve common relative links by concatenation."""

    __slots__ = (
        "directory",
        "ok",
        "origin",
        "parents",
        "scheme",
        "segments",
        "url",
        "without_query",
    )

    def __init__(self, url: str) -> None:
        url = url.partition("#")[0]
        self.url = url
        parts = urlsplit(url)
        self.scheme = parts.scheme
        self.ok = parts.scheme in ("http", "https") and bool(parts.netloc)
        self.origin = parts.scheme + "://" + parts.netloc
        path = parts.path or "/"
        self.without_query = self.origin + path
        # urljoin's view of the base path: its directory segments, empty ones dropped.
        self.segments = ["", *filter(None, path.split("/")[1:-1])]
        # A base path with dot segments or "//" is normalised by urljoin: no concatenation.
        clean = "/." not in path and "//" not in path
        self.directory = self.origin + path[: path.rfind("/") + 1] if clean else None
        # What "../" * k resolves to, k = 1, 2 ...: the directory k levels up; urljoin clamps
        # excess ".." at the root, which is the last entry.
        self.parents = (
            [
                self.origin + "/".join(self.segments[:up]) + "/"
                for up in range(max(len(self.segments) - 1, 1), 0, -1)
            ]
            if clean
            else None
        )


def _join_path(base: _Base, value: str) -> str:
    """urljoin() of a relative or root-relative reference with dot segments, without parsing.

    The same algorithm as urllib's (RFC 3986 remove_dot_segments, excess ``..`` clamped at the
    root, and urllib's dropping of empty segments of relative paths), so results agree.
    """
    path, _, query = value.partition("?")
    if path[:1] == "/":
        segments = path.split("/")
    else:
        segments = base.segments + path.split("/")
        segments[1:-1] = filter(None, segments[1:-1])
    resolved: list[str] = []
    for segment in segments:
        if segment == "..":
            if resolved:
                resolved.pop()
        elif segment != ".":
            resolved.append(segment)
    if segments[-1] in (".", ".."):
        resolved.append("")
    path = "/".join(resolved)
    if path[:1] != "/":
        path = "/" + path
    return base.origin + path + ("?" + query if query else "")


def _resolve(value: str, base: _Base) -> str | None:
    """Absolute URL of a stripped, unescaped, fragment-free link value, or None to skip it.

    Common shapes are concatenated; the rest goes to urljoin (which LinkExtractor uses), and a
    trailing "?" or ";" too, since urljoin drops an empty query or parameter list.
    """
    if value.startswith(("http://", "https://")):
        return value if value[-1] not in "?;" else urljoin(base.url, value)
    first = value[:1]
    if not base.ok:
        m = _SCHEME(value)
        if m is not None and m.group(1).lower() in ("http", "https"):
            return urljoin(base.url, value)
        return None
    if not value:
        return base.url
    if value[-1] in "?;":
        return urljoin(base.url, value)
    if first == "/":
        if value[1:2] == "/":  # protocol-relative
            return base.scheme + ":" + value
        if "/." not in value:
            return base.origin + value
        return _join_path(base, value) if ";" not in value else urljoin(base.url, value)
    if first == "?":
        return base.without_query + value
    if first == ".":  # no scheme starts with "."
        parents = base.parents
        if parents and value.startswith("../"):  # "../x/y.html", site navigation's other shape
            rest, up = value[3:], 1
            while rest.startswith("../"):
                rest, up = rest[3:], up + 1
            if (
                rest
                and rest[0] not in "./"
                and "/." not in rest
                and "//" not in rest
                and ";" not in rest
            ):
                return parents[min(up, len(parents)) - 1] + rest
    else:
        if ":" in value:
            m = _SCHEME(value)
            if m is not None:
                if m.group(1).lower() not in ("http", "https"):
                    return None  # mailto:, javascript:, data:, tel:, ftp: ...
                return urljoin(base.url, value)
        if (
            base.directory is not None
            and "//" not in value
            and ";" not in value
            and "/." not in value
        ):
            return base.directory + value
    return _join_path(base, value) if ";" not in value else urljoin(base.url, value)


def _to_text(value: str, encoding: str) -> str:
    """Re-decode a latin-1-scanned value with the page's encoding (only non-ASCII ones need it)."""
    try:
        return value.encode("latin-1").decode(encoding, "replace")
    except LookupError:  # an unknown encoding name: UTF-8 is the likeliest
        return value.encode("latin-1").decode("utf-8", "replace")


def _link(value: str, base: _Base, encoding: str, raw: bool) -> str | None:
    """The absolute http(s) URL of one attribute value, as LinkExtractor would make it."""
    if raw and not value.isascii():
        value = _to_text(value, encoding)
    if "\x00" in value:  # the tokenizer reads a NUL in an attribute value as U+FFFD
        value = value.replace("\x00", "\ufffd")
    if "&" in value:
        value = _CHAR_REF.sub(_char_ref, value)
    value = value.strip(_C0_SPACE)
    if not value.isprintable():  # the URL parser drops tabs and newlines anywhere,
        value = value.translate(_TAB_NEWLINE)  # so "java&#9;script:" is javascript:
    hash_at = value.find("#")
    if hash_at >= 0:
        value = value[:hash_at]
    try:
        url = _resolve(value, base)
    except ValueError:  # urljoin on a malformed authority ("http://[x/")
        return None
    if url is None or _SAFE_URL(url) is not None:
        return url
    try:  # percent-encode like LinkExtractor, only when a character needs it
        url = safe_url_string(url, encoding)
    except (ValueError, LookupError):  # bad port, unencodable query: LinkExtractor skips too
        return None
    return url if url.startswith(("http://", "https://")) else None


def is_safe_url(url: str) -> bool:
    """True when ``safe_url_string`` would return ``url`` unchanged (so it need not run)."""
    return type(url) is str and _SAFE_URL(url) is not None


def extract(
    body: bytes | str,
    base_url: str,
    *,
    images: bool = False,
    encoding: str = "utf-8",
    robots_names: tuple[str, ...] = ("robots",),
) -> Page:
    """Scan an HTML page once for its links, title, keywords and description.

    ``base_url`` is the page's URL; the first ``<base href>`` replaces it for every link of
    the page, those before it too (as in browsers). ``encoding`` is the page's encoding
    (``response.encoding``): it decodes non-ASCII URL characters and encodes the query, as in
    ``LinkExtractor``. Links in comments, scripts and styles are ignored; ``<img src>`` only
    with ``images=True``. Never raises on malformed markup.
    """
    if isinstance(body, bytes):
        if encoding.lower().replace("_", "-").startswith(("utf-16", "utf-32")):
            text = body.decode(encoding, "replace")
            raw = False
            encoding = "utf-8"  # URL queries of UTF-16 documents are UTF-8 (WHATWG URL)
        else:
            text = body.decode("latin-1")
            raw = True
    else:
        text, raw = body, False
    return _scan(text, raw, _Base(base_url), False, images, encoding, robots_names)


def _scan(
    text: str,
    raw: bool,
    base: _Base,
    base_seen: bool,
    images: bool,
    encoding: str,
    robots_names: tuple[str, ...],
) -> Page:
    """``extract``'s scan; ``base_seen``: the base is the page's ``<base>``, found before."""
    links: list[str] = []
    append = links.append
    nofollow: list[str] = []
    title = canonical = None
    meta = _Meta(robots_names)
    attr_of_tag = _ATTR_OF_TAG
    # The page ends inside a tag: the tokenizer drops a tag cut by the end (checked per link
    # only then, and for an empty value: a quote that never closes ends the scan's attributes)
    cut = text.rfind("<") > text.rfind(">")
    for m in scan(text, images):
        kind = m.lastindex
        if kind == _LINK:
            tag, attrs, value = m.group(1, 2, 3)
            if tag not in attr_of_tag:
                tag = tag.lower()
            matcher = attr_of_tag[tag]
            if value is None or matcher is not _HREF:
                a = matcher(attrs)
                if a is None:
                    continue
                value = _value(a)
            if (cut or not value) and _cut_off(text, m.end(), value):
                continue
            url = _link(value, base, encoding, raw)
            if url is None:
                continue
            if tag == "base":
                if not base_seen:
                    if links or nofollow or canonical is not None:  # they need it too: again
                        return _scan(text, raw, _Base(url), True, images, encoding, robots_names)
                    base_seen = True
                    base = _Base(url)
                continue
            rel = _rel(attrs) if "el" in attrs or "EL" in attrs else ()
            if "canonical" in rel and tag == "link" and canonical is None:
                canonical = url
            if "nofollow" in rel:
                nofollow.append(url)
            else:
                append(url)
        elif kind == _TITLE:
            if title is None:
                title = _title(m.group(_TITLE), raw, encoding)
        elif kind == _META_TAG:
            refresh = meta.fold(m.group(_META_TAG), encoding, raw)
            if refresh is not None and (url := _link(refresh, base, encoding, False)):
                append(url)
    return _page(links, nofollow, title, meta, canonical)


def _title(value: str, raw: bool, encoding: str) -> str | None:
    if raw and not value.isascii():
        value = _to_text(value, encoding)
    return _text(value) or None


def _page(
    links: list[str], nofollow: list[str], title: str | None, meta: _Meta, canonical: str | None
) -> Page:
    """The page's links once each; a link also given without rel="nofollow" stays followed."""
    unique = list(dict.fromkeys(links))
    if nofollow:
        followed = set(unique)
        nofollow = [u for u in dict.fromkeys(nofollow) if u not in followed]
    return Page(
        unique, title, meta.keywords, meta.description, meta.robots, canonical, tuple(nofollow)
    )


_OPEN_QUOTE = re.compile(r"""=?\s*+["']""").match  # where the scan stops at an open quote


def _cut_off(text: str, end: int, value: str) -> bool:
    """The link tag whose attributes end at ``end`` never closes: the end of the page, or an
    empty value read before a quote that does not close (the tokenizer drops such a tag)."""
    return end == len(text) or (not value and _OPEN_QUOTE(text, end) is not None)


def _rel(attrs: str) -> tuple[str, ...]:
    """The space-separated, lower-case tokens of a tag's ``rel`` attribute."""
    a = _REL(attrs)
    if a is None:
        return ()
    return tuple(_value(a).lower().split())


def robots_directives(value: str, names: tuple[str, ...] | None = None) -> frozenset[str]:
    """The directives of a robots meta ``content`` or an ``X-Robots-Tag`` value, lower-case.

    ``none`` means ``noindex, nofollow``. In a header, ``name: noindex, nofollow`` is for the
    robot ``name`` only: with ``names`` given, directives after another robot's name are left
    out (a meta tag has already been matched by its name: ``names`` None).
    """
    found: set[str] = set()
    applies = True
    for part in value.lower().split(","):
        head, colon, rest = part.partition(":")
        head = head.strip()
        directive = part
        if colon and names is not None and head not in _DIRECTIVES_WITH_VALUES:
            applies = head in names
            directive = rest
        directive = directive.strip()
        if applies and directive:
            found.update(("noindex", "nofollow") if directive == "none" else (directive,))
    return frozenset(found)


# directives whose value follows a colon (so "unavailable_after: ..." is not a robot's name)
_DIRECTIVES_WITH_VALUES = frozenset(
    ("unavailable_after", "max-snippet", "max-image-preview", "max-video-preview")
)


class _Meta:
    """What the ``<meta>`` tags of one page say; the first of each name wins."""

    __slots__ = ("description", "keywords", "names", "robots")

    def __init__(self, robots_names: tuple[str, ...]) -> None:
        self.names = robots_names
        self.keywords: str | None = None
        self.description: str | None = None
        self.robots: frozenset[str] = frozenset()

    def fold(self, attrs: str, encoding: str, raw: bool) -> str | None:
        """Take one ``<meta>`` tag in; return the target of a refresh, or None.

        ``<meta http-equiv="refresh" content="N; url=...">`` is followed as a link of the page,
        so Scrapy's MetaRefreshMiddleware (which decodes every HTML body to look for it) is
        not needed.
        """
        name = content = None
        for a in _ANY_ATTR(attrs):
            key = a.group(1).lower()
            if key in ("name", "http-equiv") and name is None:
                name = (a.group(2) or a.group(3) or a.group(4) or "").strip(_HTML_WS).lower()
                if key == "http-equiv":
                    name = "http-equiv:" + name
            elif key == "content" and content is None:
                content = a.group(2) or a.group(3) or a.group(4) or ""
        if content is None:
            return None
        if raw and not content.isascii():
            content = _to_text(content, encoding)
        if name == "keywords" and self.keywords is None:
            self.keywords = _text(content)
        elif name == "description" and self.description is None:
            self.description = _text(content)
        elif name in self.names:
            self.robots |= robots_directives(html.unescape(content))
        elif name == "http-equiv:refresh":
            target = _REFRESH_URL(html.unescape(content) if "&" in content else content)
            if target is not None and target.group(1).strip():
                return target.group(1)
        return None


# content="5; url=/next" (the delay, a ; or , then url=, the URL possibly quoted)
_REFRESH_URL = re.compile(r"\s*[0-9.]*\s*[;,]\s*url\s*=\s*['\"]?([^'\"]*)", re.I).match
