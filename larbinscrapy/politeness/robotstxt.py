"""robots.txt read as RFC 9309 and Google's open-source parser read it, kept compact.

Pure: ``compile_rules(body, token)`` reads a robots.txt body for one crawler's product token
and keeps only what that crawler obeys: its rules as a tuple of strings (``"A/path"``,
``"D/path"``) in the order they are decided (longest pattern first, ``Allow`` before
``Disallow`` of the same length), its ``Crawl-delay`` and the file's ``Sitemap`` lines. A
tuple of strings holds no reference cycle, so the cyclic collector stops walking it after one
pass: a site's rules cost bytes, not an object graph (``benchmarks/RESULTS.md``).

Groups are chosen by the product token (RFC 9309 §2.2.1): a group's ``User-agent`` value,
cut at its first character outside ``[A-Za-z0-9_-]``, equal to the token ignoring case; else
the ``*`` groups; groups of one agent are merged. Only ``Allow``/``Disallow`` lines end a run
of ``User-agent`` lines (an unknown line or ``Sitemap`` between two does not split the group).
What differs from Google's parser, and why, is in ``docs/politeness.md``.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from scrapy.robotstxt import RobotParser

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

ALLOW, DISALLOW = "A", "D"
MAX_LINE = 2083 * 8 - 1  # bytes kept of a line (Google's limit: 8 URLs of IE's length)
_TOKEN = re.compile(rb"[A-Za-z0-9_-]*")
_LINES = re.compile(rb"\r\n|\r|\n")
_BOMS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")
_KEYS = {  # the line names we read, with the misspellings Google's parser also accepts
    b"user-agent": "ua",
    b"useragent": "ua",
    b"user agent": "ua",
    b"allow": ALLOW,
    b"disallow": DISALLOW,
    b"dissallow": DISALLOW,
    b"dissalow": DISALLOW,
    b"disalow": DISALLOW,
    b"diasllow": DISALLOW,
    b"disallaw": DISALLOW,
    b"crawl-delay": "delay",
    b"crawldelay": "delay",
    b"crawl delay": "delay",
    b"sitemap": "sitemap",
    b"site-map": "sitemap",
}


def product_token(user_agent: str) -> str:
    """The product token of a ``User-Agent`` value: its leading ``[A-Za-z0-9_-]`` run,
    lower-cased (``"larbinscrapy/0.1 (+https://...)"`` -> ``"larbinscrapy"``)."""
    found = _TOKEN.match(user_agent.strip().encode("ascii", "replace"))
    return found.group().decode().lower() if found else ""


def _split(line: bytes) -> tuple[bytes, bytes] | None:
    """``(name, value)`` of a line without its comment; a missing colon is accepted
    (``disallow /``) as Google's parser does."""
    line = line.split(b"#", 1)[0].strip()
    if not line:
        return None
    if b":" in line:
        name, value = line.split(b":", 1)
    else:
        parts = line.split(None, 1)
        if len(parts) != 2:  # noqa: PLR2004 - a name and a value
            return None
        name, value = parts
    return name.strip().lower(), value.strip()


def escape_pattern(value: bytes) -> str:
    """A rule's pattern as URLs are compared: octets outside ASCII percent-encoded, and the
    hex digits of existing escapes upper-cased (RFC 9309 §2.2.2)."""
    out = re.sub(rb"%([0-9a-fA-F]{2})", lambda m: b"%" + m.group(1).upper(), value)
    return "".join(chr(b) if b < 0x80 else f"%{b:02X}" for b in out)  # noqa: PLR2004


class _Group:
    __slots__ = ("delay", "mine", "rules", "star")

    def __init__(self) -> None:
        self.mine = self.star = False
        self.rules: list[str] = []
        self.delay: float | None = None


def _read(body: bytes, token: str) -> tuple[list[_Group], list[str]]:
    """The file's groups (each marked ours or ``*``) and its sitemaps."""
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom) :]
            break
    want = token.lower().encode("ascii", "replace")
    groups: list[_Group] = []
    sitemaps: list[str] = []
    group: _Group | None = None
    in_agents = False  # the last group line read was a User-agent line
    for raw in _LINES.split(body):
        parsed = _split(raw[:MAX_LINE])
        kind = _KEYS.get(parsed[0]) if parsed else None
        if parsed is None or kind is None:
            continue
        value = parsed[1]
        if kind == "sitemap":
            if value:
                sitemaps.append(value.decode("utf-8", "replace"))
        elif kind == "ua":
            if group is None or not in_agents:
                group = _Group()
                groups.append(group)
                in_agents = True
            if value[:1] == b"*" and (len(value) == 1 or value[1:2].isspace()):
                group.star = True
            else:
                found = _TOKEN.match(value)
                group.mine |= bool(want) and found is not None and found.group().lower() == want
        elif group is not None:
            _member(group, kind, value)
            in_agents = in_agents and kind == "delay"
    return groups, sitemaps


def _member(group: _Group, kind: str, value: bytes) -> None:
    """A rule line (or Crawl-delay) of ``group``."""
    if kind == "delay":
        try:
            delay = float(value)
        except ValueError:
            return
        if delay >= 0 and group.delay is None:
            group.delay = delay
        return
    pattern = escape_pattern(value)
    if not pattern:
        return  # an empty pattern matches with priority 0: it decides nothing
    group.rules.append(kind + pattern)
    if kind == ALLOW and pattern.endswith("/index.html"):  # Google: index.html means the dir
        group.rules.append(ALLOW + pattern[: -len("index.html")] + "$")


def compile_rules(body: bytes, token: str) -> tuple[tuple[str, ...], float | None, tuple[str, ...]]:
    """``(rules, crawl_delay, sitemaps)`` of ``body`` for the product ``token`` (module doc)."""
    groups, sitemaps = _read(body, token)
    chosen = [g for g in groups if g.mine] or [g for g in groups if g.star]
    rules = {r for g in chosen for r in g.rules}
    ordered = sorted(rules, key=lambda r: (-len(r), r[0] != ALLOW, r))
    delays = [g.delay for g in chosen if g.delay is not None]
    return tuple(ordered), (delays[0] if delays else None), tuple(sitemaps)


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern[str]:
    """A pattern with ``*`` (any characters) or a final ``$`` (the end) as a regex."""
    end = pattern.endswith("$")
    body = pattern[:-1] if end else pattern
    return re.compile(
        ".*".join(map(re.escape, body.split("*"))) + (r"\Z" if end else ""), re.DOTALL
    )


def matches(pattern: str, path: str) -> bool:
    if "*" in pattern or pattern.endswith("$"):
        return _regex(pattern).match(path) is not None
    return path.startswith(pattern)


def allowed(rules: tuple[str, ...], path: str) -> bool:
    """Whether ``path`` (with its query) may be fetched: the first rule that matches decides."""
    for rule in rules:
        if matches(rule[1:], path):
            return rule[0] == ALLOW
    return True


def path_of(url: str) -> str:
    """The path, params and query of ``url`` as robots.txt rules are matched against them:
    no fragment, ``/`` when empty (RFC 9309 §2.2.2)."""
    start = 2 if url.startswith("//") else 0
    early = _first_of(url, "/?;", start)
    scheme_end = url.find("://", start)
    if scheme_end == -1 or (early != -1 and early < scheme_end):
        scheme_end = start
    else:
        scheme_end += 3
    path_start = _first_of(url, "/?;", scheme_end)
    if path_start == -1:
        return "/"
    hash_pos = url.find("#", start)
    if hash_pos != -1 and hash_pos < path_start:
        return "/"
    path = url[path_start : len(url) if hash_pos == -1 else hash_pos]
    return path if path.startswith("/") else "/" + path


def _first_of(text: str, chars: str, start: int) -> int:
    found = [i for i in (text.find(c, start) for c in chars) if i != -1]
    return min(found) if found else -1


class RobotsTxtParser(RobotParser):
    """``ROBOTSTXT_PARSER``: one site's rules for the crawl's product token (module doc).

    ``allowed`` ignores its ``user_agent``: the group was chosen when the file was read, for
    ``ROBOTSTXT_USER_AGENT``, else the product name of ``USER_AGENT``.
    """

    __slots__ = ("crawl_delay_seconds", "rules", "sitemaps")

    def __init__(self, body: bytes, token: str) -> None:
        self.rules, self.crawl_delay_seconds, self.sitemaps = compile_rules(body, token)

    @classmethod
    def from_crawler(cls, crawler: Crawler, robotstxt_body: bytes) -> RobotsTxtParser:
        return cls(robotstxt_body, token_of(crawler.settings))

    def allowed(self, url: str | bytes, user_agent: Any = None) -> bool:
        text = url.decode("utf-8", "replace") if isinstance(url, bytes) else url
        return allowed(self.rules, path_of(text))

    def crawl_delay(self, user_agent: Any = None) -> float | None:
        return self.crawl_delay_seconds


def token_of(settings: Any) -> str:
    """The crawl's product token: ``ROBOTSTXT_USER_AGENT`` when set, else ``USER_AGENT``'s."""
    return product_token(settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "")
