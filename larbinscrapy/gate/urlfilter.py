"""larbin's ``check()`` / ``filter1()``: the URL tests done before a URL is ever queued (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from larbinscrapy.parse.urls import extension_of, host_of, is_valid_url

if TYPE_CHECKING:
    from collections.abc import Iterable

# Reasons, in the order the tests run (cheapest and most common first).
SCHEME = "scheme"
LENGTH = "length"
INVALID = "invalid"
PATH_SEGMENTS = "path_segments"
PATH_REPEAT = "path_repeat"
EXTENSION = "extension"
CGI = "cgi"
DOMAIN = "domain"
EXTERNAL = "external"
DEPTH = "depth"
PAGE_LINKS = "page_links"  # over LARBIN_LINKS_PER_PAGE_MAX (the spider counts it, not the filter)

_CGI_WORD = 2  # LARBIN_GATE_CGI_LEVEL that also refuses URLs with "cgi" in them


_REPEAT_WINDOW = 32  # segments the repetition test looks at: bounds its cost on hostile paths


def repeated_run(segments: list[str], limit: int) -> bool:
    """Whether some run of path segments repeats more than ``limit`` times back to back.

    ``["a", "b", "a", "b", "a", "b"]`` with limit 2 -> True. Only the first ``_REPEAT_WINDOW``
    segments count, so the test is bounded whatever the path (cubic in that window at worst; a
    path without a repeated segment costs one set).
    """
    segments = segments[:_REPEAT_WINDOW]
    n = len(segments)
    if len(set(segments)) == n:
        return False
    for period in range(1, n // (limit + 1) + 1):
        for offset in range(period):
            run = 1
            for i in range(offset + period, n - period + 1, period):
                if segments[i : i + period] == segments[i - period : i]:
                    run += 1
                    if run > limit:
                        return True
                else:
                    run = 1
    return False


def parse_extensions(value: str | Iterable[str]) -> frozenset[str]:
    """``".pdf .ZIP"`` or ``[".pdf", "zip"]`` -> ``{".pdf", ".zip"}``."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    return frozenset("." + e.lower().lstrip(".") for e in items if e.strip("."))


def parse_domains(value: str | Iterable[str]) -> tuple[str, ...]:
    """``"example.com, .org"`` -> ``("example.com", "org")``: host suffixes, lower-case."""
    items = value.split(",") if isinstance(value, str) else value
    return tuple(d.strip().lower().strip(".") for d in items if d.strip().strip("."))


@dataclass(frozen=True)
class UrlFilter:
    """The filters of one crawl; ``reason()`` answers for one URL.

    ``max_depth`` is larbin's depthInSite: the depth counted inside one site, restarting at 0
    when a link leads to another host. ``cgi_level`` is larbin's CGILEVEL.
    """

    forbidden_extensions: frozenset[str] = frozenset()
    domains: tuple[str, ...] = ()
    external: bool = True
    max_depth: int | None = None
    max_length: int = 512
    cgi_level: int = 0
    max_path_segments: int = 0  # 0: no limit
    max_path_repeats: int = 0  # 0: no test

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> UrlFilter:
        """The crawl's filter from ``LARBIN_*`` settings; spider arguments (not None) override."""
        values: dict[str, Any] = {
            "forbidden_extensions": parse_extensions(
                settings.get("LARBIN_GATE_FORBIDDEN_EXTENSIONS") or ""
            ),
            "domains": parse_domains(settings.get("LARBIN_DOMAINS") or ""),
            "external": settings.getbool("LARBIN_EXTERNAL"),
            "max_depth": settings.getint("LARBIN_DEPTH"),
            "max_length": settings.getint("URLLENGTH_LIMIT"),
            "cgi_level": settings.getint("LARBIN_GATE_CGI_LEVEL"),
            "max_path_segments": settings.getint("LARBIN_GATE_PATH_SEGMENTS_MAX"),
            "max_path_repeats": settings.getint("LARBIN_GATE_PATH_REPEATS_MAX"),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values["max_depth"] is not None and values["max_depth"] < 0:
            values["max_depth"] = None
        return cls(**values)

    def __post_init__(self) -> None:
        if self.cgi_level not in (0, 1, 2):
            raise ValueError(f"LARBIN_GATE_CGI_LEVEL must be 0, 1 or 2, got {self.cgi_level!r}")

    def reason(
        self, url: str, host: str, site_depth: int = 0, source_host: str | None = None
    ) -> str | None:
        """Why ``url`` (on ``host``) must not be queued, or None to queue it.

        ``site_depth`` is the URL's depth inside its site; ``source_host`` the host of the page
        that links to it (None for seeds, which are never "external").
        """
        if not url.startswith(("http://", "https://")):
            return SCHEME
        if len(url) > self.max_length:
            return LENGTH
        if not is_valid_url(url):
            return INVALID
        if self.forbidden_extensions and extension_of(url) in self.forbidden_extensions:
            return EXTENSION
        if self.cgi_level and (
            "?" in url or "=" in url or (self.cgi_level == _CGI_WORD and "cgi" in url.lower())
        ):
            return CGI
        if self.domains and not self._in_domains(host):
            return DOMAIN
        reason = self.context_reason(host, site_depth, source_host)
        if reason is not None:
            return reason
        if self.max_path_segments or self.max_path_repeats:
            return self._path_reason(url)
        return None

    def context_reason(
        self, host: str, site_depth: int = 0, source_host: str | None = None
    ) -> str | None:
        """The part of ``reason()`` that depends on the linking page, not on the URL alone.

        The link gate asks only this for a link string that passed ``reason()`` before (its
        raw-link cache): the other tests would answer as they did then.
        """
        if source_host is not None and not self.external and host != source_host:
            return EXTERNAL
        if self.max_depth is not None and site_depth > self.max_depth:
            return DEPTH
        return None

    def _path_reason(self, url: str) -> str | None:
        start = url.find("/", url.find("//") + 2)
        if start < 0:
            return None
        end = len(url)
        for sep in "?#":
            i = url.find(sep, start)
            if 0 <= i < end:
                end = i
        segments = url[start + 1 : end].split("/")
        if self.max_path_segments and len(segments) > self.max_path_segments:
            return PATH_SEGMENTS
        if self.max_path_repeats and repeated_run(segments, self.max_path_repeats):
            return PATH_REPEAT
        return None

    def check(self, url: str, site_depth: int = 0, source_host: str | None = None) -> str | None:
        """``reason()`` for callers that have not split out the host yet."""
        return self.reason(url, host_of(url), site_depth, source_host)

    def _in_domains(self, host: str) -> bool:
        return any(host == d or host.endswith("." + d) for d in self.domains)
