"""Canonical URLs and the URL hash: larbin's ``url.cc`` as pure functions."""

from __future__ import annotations

import logging
import re
import weakref
from contextlib import suppress
from typing import TYPE_CHECKING, Protocol, Self, runtime_checkable
from urllib.parse import urlsplit

from w3lib.url import safe_url_string
from xxhash import xxh3_128_digest

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

__all__ = [
    "CanonicalUrlFingerprinter",
    "UrlFingerprinter",
    "canonicalize",
    "check_url",
    "extension_of",
    "fingerprint_url",
    "host_of",
    "is_valid_url",
    "site_of",
]

MAX_PORT = 65535
DEFAULT_PORTS = {"http": "80", "https": "443", "ftp": "21", "ws": "80", "wss": "443"}

# An http(s) URL that is canonical but for the order of its query arguments: lower-case host,
# no port or a non-default one, a path, no fragment, only characters safe_url_string() keeps.
# One fullmatch() of this proves canonicalize(url) == url when the query has no "&".
_SAFE_PATH = r"[!$%'()*+,\-./0-9:;=@A-Z_a-z~]"
_SAFE_QUERY = r"[!$%&()*+,\-./0-9:;=?@A-Z_a-z~]"
_CANONICAL = re.compile(
    rf"https?://[a-z0-9.\-]+(?::([1-9][0-9]*))?/{_SAFE_PATH}*(?:\?({_SAFE_QUERY}+))?"
).fullmatch

# Characters safe_url_string() would percent-encode or strip (a quote only matters in the query
# of http(s) URLs, but it is rare enough to send every URL that has one down the general path).
_NEEDS_QUOTING = re.compile(r"[^!#-&(-;=?-Z_a-z~]").search

# scheme, //authority (optional), path, query; the fragment is cut off before matching.
_SPLIT = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):(?://([^/?]*))?([^?]*)(?:\?(.*))?", re.S).fullmatch

# The common case of site_of/host_of: an http(s) URL with a lower-case host.
_SITE_FAST = re.compile(r"(https?://[a-z0-9.\-]+)(:[1-9][0-9]*)?(?=[/?#]|\Z)").match
_HOST_FAST = re.compile(r"https?://([a-z0-9.\-]+)(?::[0-9]*)?(?=[/?#]|\Z)").match

# scheme://[userinfo@]host[:port] at the start of a URL, for site_of/host_of/extension_of.
_AUTHORITY = re.compile(
    r"([A-Za-z][A-Za-z0-9+.\-]*)://(?:[^/?#@]*@)?(\[[^\]/?#]*\]|[^:/?#]*)(?::([^/?#]*))?"
).match


# Session-id parameters (Heritrix's StripSessionIDs): a server hands each visitor a new one, so
# without this one page is a new URL per visit. ``sid`` only with a token-like value (16+
# characters), since short ``sid=`` values are as often a site or section id.
_SESSION_ARG = re.compile(
    r"(?:jsessionid|phpsessid|sessionid|session_id|aspsessionid[a-z]*|cfid|cftoken)=[^&;]*"
    r"|sid=[0-9a-z]{16,}(?=[&;]|\Z)",
    re.I | re.A,
).fullmatch
_HAS_SESSION = re.compile(r"[;?&](?:[a-z_]*sess|sid=|cf(?:id|token)=)", re.I | re.A).search

# An http(s) URL a Request accepts as it is: a host of name characters, a port of at most 5
# digits (checked for 1-65535 after), and in the rest only characters that need no quoting and
# whole %XX escapes. Anything else goes to ``_invalid_general``.
_VALID_FAST = re.compile(
    r"https?://[a-z0-9_][a-z0-9_.\-]*+(?::([0-9]{1,5}))?"
    r"(?:[/?](?:[!$&-;=?-Z_a-z~]|%[0-9A-Fa-f]{2})*+)?"
).fullmatch
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]").search
_BROKEN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})").search
_HOST_NAME = re.compile(r"[a-z0-9_][a-z0-9_.\-]*", re.A).fullmatch


_SEED_SCHEMES = frozenset(("http", "https"))


def check_url(url: str, max_length: int = 0) -> str | None:
    """Why ``url`` cannot be a seed or an added URL (scheme, host, port), or None when it can.

    ``max_length`` is the link gate's ``URLLENGTH_LIMIT`` (0: none): a longer seed would be
    dropped there without a word, so it is reported with the other bad seeds."""
    if any(c.isspace() for c in url):
        return "contains whitespace"
    if max_length and len(url) > max_length:
        return f"longer than URLLENGTH_LIMIT ({len(url)} > {max_length} characters)"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        return f"malformed URL ({exc})"
    if parts.scheme.lower() not in _SEED_SCHEMES:
        return f"scheme must be http or https, got {parts.scheme or 'none'!r}"
    if not parts.hostname:
        return "no host"
    if port == 0:
        return "port 0"
    return None


def is_valid_url(url: str) -> bool:
    """Whether ``url`` is an absolute http(s) URL a ``Request`` accepts and a server can get.

    False for what ``Request()`` refuses (a port out of range, a bad IPv6 literal, a lone
    surrogate) and for what no server can answer: an empty host, port 0, control characters,
    a broken percent-escape, characters no host name has. The link gate counts these under
    ``larbin/filtered/invalid`` instead of letting ``Request()`` raise in the middle of a page.
    """
    m = _VALID_FAST(url)
    if m is not None:
        port = m.group(1)
        return port is None or 0 < int(port) <= MAX_PORT
    return not _invalid_general(url)


def _invalid_general(url: str) -> bool:
    if _CONTROL(url) is not None or _BROKEN_ESCAPE(url) is not None:
        return True
    try:
        url.encode("utf-8")
        safe = safe_url_string(url)  # Request() does this: ValueError on port, IPv6, IDNA
        parts = urlsplit(safe)
        host, port = parts.hostname, parts.port
    except ValueError:  # UnicodeError is one
        return True
    if parts.scheme not in ("http", "https") or not host or port == 0:
        return True
    return not (parts.netloc.rpartition("@")[2].startswith("[") or _HOST_NAME(host))


def canonicalize(url: str) -> str:
    """Return the dupefilter's canonical form of ``url``.

    Lower-case scheme and host, no default port, no fragment, ``/`` for an empty path, query
    arguments sorted by key then value (blank ones kept, empty ``?`` dropped), session-id
    parameters (``jsessionid``, ``PHPSESSID``, ``sid=<token>``...) removed from the query and the
    path parameters; characters a ``scrapy.Request`` would percent-encode are encoded the same
    way (``safe_url_string``), so ``canonicalize(u) == canonicalize(Request(u).url)``.
    Percent-escapes are left as they are: ``%2F`` is not ``/`` to a server.
    """
    m = _CANONICAL(url)
    if m is not None and ((";" not in url and m.group(2) is None) or _HAS_SESSION(url) is None):
        port, query = m.groups()
        if port is None or port not in {"80", "443"}:
            if query is None or "&" not in query:
                return url
            return url[: m.start(2) - 1] + _canonical_query(query)
    return _canonicalize_general(url)


def _canonicalize_general(url: str) -> str:
    if _NEEDS_QUOTING(url) is not None:
        with suppress(ValueError):  # e.g. a non-numeric port: the string is still a usable key
            url = safe_url_string(url)
    hash_at = url.find("#")
    if hash_at >= 0:
        url = url[:hash_at]
    m = _SPLIT(url)
    if m is None:  # relative or scheme-less: nothing more to normalise
        return url
    scheme, authority, path, query = m.groups()
    scheme = scheme.lower()
    if authority is None:  # mailto:, data:, about: ...
        out = scheme + ":" + path
    else:
        if ";" in path:
            path = _strip_session_params(path)
        out = scheme + "://" + _canonical_authority(scheme, authority) + (path or "/")
    if query:
        out += _canonical_query(query)
    return out


def _strip_session_params(path: str) -> str:
    """``/a;jsessionid=X/b.html`` -> ``/a/b.html``: session ids as path parameters."""
    segments = path.split("/")
    for i, segment in enumerate(segments):
        if ";" in segment:
            name, *params = segment.split(";")
            kept = [p for p in params if _SESSION_ARG(p) is None]
            segments[i] = ";".join([name, *kept])
    return "/".join(segments)


def _canonical_authority(scheme: str, authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")
    host, port = _split_hostport(hostport)
    host = host.lower()
    if port:
        if port.isdigit():
            port = str(int(port))
        if port != DEFAULT_PORTS.get(scheme):
            host = host + ":" + port
    return userinfo + at + host


def _split_hostport(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):  # IPv6 literal: the port follows the closing bracket
        close = hostport.find("]")
        if close >= 0:
            rest = hostport[close + 1 :]
            return hostport[: close + 1], rest[1:] if rest.startswith(":") else ""
    host, _, port = hostport.partition(":")
    return host, port


def _query_key(arg: str) -> tuple[str, str]:
    key, _, value = arg.partition("=")
    return key, value


def _canonical_query(query: str) -> str:
    if "&" not in query and _SESSION_ARG(query) is None:
        return "?" + query
    args = [arg for arg in query.split("&") if arg and _SESSION_ARG(arg) is None]
    if not args:
        return ""
    args.sort(key=_query_key)  # stable: equal (key, value) pairs keep their order
    return "?" + "&".join(args)


def site_of(url: str) -> str:
    """Return ``scheme://host:port`` of ``url``, lower-case, the port always written out.

    This is larbin's site: the unit of the per-site queue and of robots.txt. The port is
    explicit so ``http://a.com/`` and ``http://a.com:80/`` are one site.
    """
    m = _SITE_FAST(url)
    if m is not None:
        if m.group(2) is not None:
            return m.group(0)
        return m.group(1) + (":80" if url[4] == ":" else ":443")
    m = _AUTHORITY(url)
    if m is None:
        return ""
    scheme, host, port = m.groups()
    scheme = scheme.lower()
    port = str(int(port)) if port and port.isdigit() else DEFAULT_PORTS.get(scheme, "")
    if port:
        return scheme + "://" + host.lower() + ":" + port
    return scheme + "://" + host.lower()


def site_origin(site: str) -> str:
    """The origin URL of a ``site_of`` key, its scheme's default port left out (as a browser,
    and the ``Host`` header, write it): ``https://a.com:443`` -> ``https://a.com``."""
    scheme, _, rest = site.partition("://")
    host, _, port = rest.rpartition(":")
    if port == DEFAULT_PORTS.get(scheme):
        return scheme + "://" + host
    return site


def host_of(url: str) -> str:
    """Return the lower-case host name of ``url`` (no port, IPv6 without brackets), or ''."""
    m = _HOST_FAST(url)
    if m is not None:
        return m.group(1)
    m = _AUTHORITY(url)
    if m is None:
        return ""
    host = m.group(2).lower()
    if host.startswith("["):
        return host[1:-1]
    return host


_HTTP = ("http://", "https://")


def extension_of(url: str) -> str:
    """Return the lower-case extension of the last path segment, dot included, or ''.

    The query and fragment do not count (``/a/b.PDF?x=1`` is ``.pdf``) and neither do dots in
    directories or the host (``/a.b/c`` and ``http://a.com`` have none): larbin's
    forbiddenExtensions test needs exactly the file's extension.
    """
    if url.startswith(_HTTP) and "?" not in url and "#" not in url and ";" not in url:
        # The common link: a plain http(s) URL; its path starts at the first "/" after "//".
        if url.find("/", 8) < 0:
            return ""
        dot = url.rfind(".", url.rfind("/") + 1)
        if dot < 0 or dot == len(url) - 1:
            return ""
        return url[dot:].lower()
    m = _AUTHORITY(url)
    start = m.end() if m is not None else 0
    end = len(url)
    for sep in "?#":
        i = url.find(sep, start, end)
        if i >= 0:
            end = i
    slash = url.rfind("/", start, end)
    if slash >= 0:
        start = slash + 1
    semi = url.find(";", start, end)  # path parameters: /a.pdf;jsessionid=x
    if semi >= 0:
        end = semi
    dot = url.rfind(".", start, end)
    if dot < 0 or dot == end - 1:
        return ""
    return url[dot:end].lower()


def fingerprint_url(url: str) -> bytes:
    """Return the fingerprint a GET ``Request(url)`` without body would get.

    The link gate hashes each link with this and tests the dupefilter before it builds any
    Request: building one and fingerprinting it costs far more than this string hash.
    """
    return xxh3_128_digest(("GET " + canonicalize(url)).encode())


def _fingerprint(method: str, url: str, body: bytes) -> bytes:
    key = (method + " " + canonicalize(url)).encode()
    if body:
        key += b"\0" + body
    return xxh3_128_digest(key)


@runtime_checkable
class UrlFingerprinter(Protocol):
    """A request fingerprinter that fingerprints a bare URL as it would ``Request(url)``."""

    def fingerprint_url(self, url: str) -> bytes:
        """The fingerprint of a GET of ``url`` without a body."""


class CanonicalUrlFingerprinter:
    """Scrapy's ``REQUEST_FINGERPRINTER_CLASS``: 16 bytes of xxh3_128(method, canonical URL, body).

    Why not Scrapy's SHA1 of ``canonicalize_url``: ``canonicalize_url`` and SHA1 are the slow
    part (benchmarks/RESULTS.md), and the link gate fingerprints every link of every page. xxh3
    is faster than SHA1, and it is seeded with a constant, so fingerprints are stable across
    processes and can be kept in a JOBDIR (unlike Python's ``hash()``). 128 bits make collisions
    negligible (about 1e-20 for 1e9 URLs); cryptographic strength buys nothing against URLs
    we choose to fetch. Headers are not part of the key, as in Scrapy's default.
    """

    def __init__(self, crawler: Crawler | None = None) -> None:
        self._cache: weakref.WeakKeyDictionary[Request, bytes] = weakref.WeakKeyDictionary()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def fingerprint(self, request: Request) -> bytes:
        """Return the 16-byte fingerprint of ``request``, cached for the request's lifetime."""
        cache = self._cache
        fp = cache.get(request)
        if fp is None:
            fp = _fingerprint(request.method, request.url, request.body)
            cache[request] = fp
        return fp

    def fingerprint_url(self, url: str) -> bytes:
        """Same as the module's ``fingerprint_url``: the link gate calls it on the fingerprinter."""
        return fingerprint_url(url)
