"""The test web as data: hosts, pages, robots.txt, and the oracle of a correct crawl. No I/O.

``build_web(name, port)`` is deterministic (a seeded ``random.Random``, no ``hash()``), so a
test builds the same ``Web`` as the server it started and can assert the crawl against
``Web.ground_truth()``. The graph is built so that the oracle does not depend on the order a
crawler fetches pages in: every URL is first discovered at its smallest site depth whatever the
order (``tests/test_testweb.py`` checks it with random orders), because a real crawler's per-IP
queues fetch in no fixed order.

URLs are absolute, ``http://host:port/path?query``, with queries already in canonical (sorted)
form, so the URL the crawler requests is the one written here.
"""

from __future__ import annotations

import html
import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urldefrag, urljoin, urlsplit, urlunsplit

from protego import Protego

from settings.base import BOT_NAME, LARBIN_GATE_FORBIDDEN_EXTENSIONS, URLLENGTH_LIMIT

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

logger = logging.getLogger(__name__)

HTML = "text/html; charset=utf-8"
TEXT = "text/plain; charset=utf-8"
ROBOTS_AGENT = BOT_NAME  # the product token robots.txt groups are matched against
DEFAULT_FORBIDDEN_EXTENSIONS = frozenset(
    e.lower() for e in LARBIN_GATE_FORBIDDEN_EXTENSIONS.split()
)
WEB_NAMES = ("default", "demo", "skewed", "politeness", "overflow")

_FILLER = (  # the vocabulary of filler paragraphs
    "crawler frontier politeness robots queue site host page link anchor depth seed "
    "hash bitmap fetch parse index archive mirror document server request response "
    "delay socket buffer network domain filter extension duplicate content title "
    "keyword description frame table"
)
_WORDS = tuple(_FILLER.split())


@dataclass
class Page:
    """One response the server sends: status, headers, body, and what a crawler finds in it.

    ``links`` are the absolute URLs (fragments dropped, non-HTTP schemes left out) a browser
    would follow from ``<a|area|link href>`` and ``<frame|iframe src>``; ``images`` those of
    ``<img src>``. ``redirect`` is the absolute target of a 3xx.
    """

    status: int
    content_type: str
    body: bytes
    links: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    redirect: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    title: str = ""
    keywords: str = ""
    description: str = ""

    @property
    def is_html(self) -> bool:
        return self.content_type.startswith("text/html")


def resolve_link(href: str, base: str) -> str | None:
    """The absolute URL a browser follows for ``href`` on a page at ``base``, or None.

    Whitespace around the href is stripped, the fragment dropped, an empty path becomes ``/``
    and the host is lower-cased; ``mailto:``, ``javascript:`` and other schemes give None.
    """
    url, _ = urldefrag(urljoin(base, href.strip()))
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path or "/", parts.query, ""))


def _site(url: str) -> tuple[str, str, int | None]:
    """larbin's site: scheme, host and port (a link to another one restarts the depth)."""
    parts = urlsplit(url)
    return parts.scheme, parts.hostname or "", parts.port


def _extension(url: str) -> str:
    """Lower-case extension of the last path segment, dot included, or ''."""
    segment = urlsplit(url).path.rsplit("/", 1)[-1]
    dot = segment.rfind(".")
    return segment[dot:].lower() if 0 <= dot < len(segment) - 1 else ""


def _in_domains(host: str, domains: Sequence[str]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


@dataclass
class Web:
    """A whole test web for one port: what the server serves and what a crawl must request."""

    name: str
    port: int
    hosts: dict[str, str]  # hostname -> loopback IP (several names may share one IP)
    pages: dict[str, Page]  # absolute URL -> response
    robots: dict[str, Page]  # hostname -> its /robots.txt response
    seeds: list[str]
    slow_ips: set[str] = field(default_factory=set)
    duplicate_groups: list[set[str]] = field(default_factory=list)  # byte-identical bodies
    disallowed: set[str] = field(default_factory=set)  # robots-disallowed URLs of the web
    forbidden: set[str] = field(default_factory=set)  # URLs with a forbidden extension
    too_long: set[str] = field(default_factory=set)  # URLs longer than URLLENGTH_LIMIT
    _parsers: dict[str, Protego | None] = field(default_factory=dict, repr=False)

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"

    def lookup(self, host: str, target: str) -> Page | None:
        """The page for a request to ``host`` with request-target ``target`` (path?query)."""
        if target == "/robots.txt":
            return self.robots.get(host)
        return self.pages.get(self.url(host, target))

    def robots_parser(self, host: str) -> Protego | None:
        """The host's robots.txt as Scrapy's ProtegoRobotParser sees it; None = allow all."""
        if host not in self._parsers:
            page = self.robots.get(host)
            if page is None or page.status >= 400:
                self._parsers[host] = None
            else:  # decoded exactly as scrapy.robotstxt.decode_robotstxt does for protego
                self._parsers[host] = Protego.parse(page.body.decode("utf-8-sig", errors="ignore"))
        return self._parsers[host]

    def can_fetch(self, url: str) -> bool:
        parser = self.robots_parser(urlsplit(url).hostname or "")
        return parser is None or parser.can_fetch(url, ROBOTS_AGENT)

    def crawl_delay(self, host: str) -> float | None:
        parser = self.robots_parser(host)
        return None if parser is None else parser.crawl_delay(ROBOTS_AGENT)

    def ground_truth(
        self,
        seeds: Iterable[str],
        *,
        depth: int | None = None,
        domains: Iterable[str] | None = None,
        external: bool = True,
        images: bool = False,
        forbidden_extensions: Iterable[str] = DEFAULT_FORBIDDEN_EXTENSIONS,
        max_url_length: int = URLLENGTH_LIMIT,
        order: random.Random | None = None,
        reached: set[str] | None = None,
    ) -> set[str]:
        """The URLs a correct polite crawler requests from ``seeds`` (robots.txt excluded).

        larbin's rules: seeds have site depth 0 and are always requested unless robots.txt
        disallows them; a link is followed if it is http(s), at most ``max_url_length`` long,
        without a forbidden extension (case-insensitive), inside ``domains`` (host suffix), to
        the same site or ``external``, and its site depth (parent + 1 on the same site, 0 on
        another) is at most ``depth``. A redirect target passes the same filters as a link
        (but depth: it inherits the redirecting URL's), except a seed's, which is the seed's.
        Error and non-HTML pages have no links followed. ``order`` fetches in a random order
        instead of breadth-first: the answer must not change (the web is built so), as a real
        crawler's order is not fixed. ``reached`` is filled with the sites (``scheme://netloc``)
        of this web whose URLs reach the downloader, allowed by robots.txt or not
        (``sitemap_truth``).
        """
        return self._crawl(
            list(seeds),
            depth=depth,
            domains=tuple(d.strip().lower().strip(".") for d in domains or () if d.strip(".")),
            external=external,
            images=images,
            forbidden=frozenset("." + e.lower().lstrip(".") for e in forbidden_extensions),
            max_url_length=max_url_length,
            order=order,
            reached=set() if reached is None else reached,
        )

    def sitemap_truth(self, seeds: Iterable[str], **options: Any) -> set[str]:
        """The sitemap URLs a correct crawler also requests (``options``: ``ground_truth``'s).

        Once per site the crawl reaches: the same-site ``Sitemap:`` lines of its robots.txt,
        else its ``/sitemap.xml``, each unless robots.txt disallows it. The test webs serve no
        sitemap (a 404), so nothing more is requested through them.
        """
        reached: set[str] = set()
        self.ground_truth(seeds, reached=reached, **options)
        wanted: set[str] = set()
        for site in reached:
            parser = self.robots_parser(urlsplit(site).hostname or "")
            listed = [u for u in (parser.sitemaps if parser else ()) if u.startswith(site + "/")]
            wanted.update(u for u in listed or [site + "/sitemap.xml"] if self.can_fetch(u))
        return wanted

    def _crawl(
        self,
        seeds: list[str],
        *,
        depth: int | None,
        domains: tuple[str, ...],
        external: bool,
        images: bool,
        forbidden: frozenset[str],
        max_url_length: int,
        order: random.Random | None = None,
        reached: set[str],
    ) -> set[str]:
        """Breadth-first crawl, or in a random order with ``order`` (to prove it does not matter).

        A URL counts as seen when admitted (as the link gate sets its bit); robots.txt is
        applied when it is fetched, as the downloader middleware does.
        """

        def passes(link: str, source: str, external: bool) -> bool:
            """The link filters but depth, for a link or a redirect target found at ``source``."""
            if len(link) > max_url_length or _extension(link) in forbidden:
                return False
            if domains and not _in_domains(urlsplit(link).hostname or "", domains):
                return False
            return external or _site(link) == _site(source)

        seen: set[str] = set()
        seed_urls: set[str] = set()
        frontier: list[tuple[str, int]] = []
        for seed in seeds:
            url = resolve_link(seed, seed)
            if url is not None and url not in seen:
                seen.add(url)
                seed_urls.add(url)
                frontier.append((url, 0))
        requested: set[str] = set()
        while frontier:
            url, site_depth = frontier.pop(order.randrange(len(frontier)) if order else 0)
            parts = urlsplit(url)
            if parts.hostname in self.hosts:  # one nobody serves gets no robots.txt, no answer
                reached.add(f"{parts.scheme}://{parts.netloc}")
            if not self.can_fetch(url):
                continue
            requested.add(url)
            page = self.pages.get(url)
            if page is None:
                continue
            if page.redirect is not None:
                target = page.redirect
                if target not in seen and (url in seed_urls or passes(target, url, external)):
                    seen.add(target)
                    frontier.append((target, site_depth))
                continue
            if page.status >= 400 or not page.is_html:
                continue
            site = _site(url)
            for link in (page.links + page.images) if images else page.links:
                if link in seen or not passes(link, url, external):
                    continue
                link_depth = site_depth + 1 if _site(link) == site else 0
                if depth is not None and link_depth > depth:
                    continue
                seen.add(link)
                frontier.append((link, link_depth))
        return requested

    def _finish(self) -> None:
        """Derive the declared trap sets from the pages and every URL they link to."""
        universe = set(self.pages)
        for page in self.pages.values():
            universe.update(page.links, page.images)
        self.disallowed = {u for u in universe if not self.can_fetch(u)}
        self.forbidden = {u for u in universe if _extension(u) in DEFAULT_FORBIDDEN_EXTENSIONS}
        self.too_long = {u for u in universe if len(u) > URLLENGTH_LIMIT}


class _Builder:
    """Writes pages into a ``Web``: HTML from href lists, so body and declared links agree."""

    def __init__(self, web: Web, seed: int) -> None:
        self.web = web
        self.rng = random.Random(seed)

    def host(self, name: str, ip: str, robots: str | None = None, *, status: int = 200) -> None:
        """Add a host; ``robots`` is its robots.txt text (None: an HTML 404 page)."""
        self.web.hosts[name] = ip
        if robots is None:
            self.web.robots[name] = self._error_body(404, "robots.txt not found")
        else:
            self.web.robots[name] = Page(status, TEXT, robots.encode(), title="robots.txt")

    def text(self, n: int = 2) -> str:
        """``n`` paragraphs of seeded filler, so pages have realistic sizes and differ."""
        paras = []
        for _ in range(n):
            words = [self.rng.choice(_WORDS) for _ in range(self.rng.randint(25, 60))]
            paras.append("<p>" + " ".join(words).capitalize() + ".</p>")
        return "\n".join(paras)

    def html(
        self,
        host: str,
        path: str,
        title: str,
        links: Sequence[str] = (),
        *,
        status: int = 200,
        base: str | None = None,
        frames: Sequence[str] = (),
        iframes: Sequence[str] = (),
        areas: Sequence[str] = (),
        images: Sequence[str] = (),
        head_links: Sequence[str] = (),
        keywords: str = "",
        description: str = "",
        paragraphs: int = 1,
        also_at: Sequence[tuple[str, str]] = (),
    ) -> None:
        """An HTML page (a frameset if ``frames``); ``also_at`` serves the same bytes elsewhere.

        The declared links are resolved from the same hrefs the body is written from, against
        ``base`` if given, so the model cannot disagree with the HTML.
        """
        head = _head(title, keywords, description, base, head_links)
        if frames:
            body = _frameset(frames)
        else:
            body = _body(title, self.text(paragraphs), links, images, areas, iframes)
        data = f'<!DOCTYPE html>\n<html lang="en">\n{head}\n{body}\n</html>\n'.encode()
        hrefs = [*head_links, *links, *areas, *frames, *iframes]
        where = [(host, path), *also_at]
        for h, pth in where:
            url = self.web.url(h, pth)
            resolve_base = urljoin(url, base) if base else url
            self.web.pages[url] = Page(
                status,
                HTML,
                data,
                links=_resolve_all(hrefs, resolve_base),
                images=_resolve_all(images, resolve_base),
                title=title,
                keywords=keywords,
                description=description,
            )
        if also_at:
            self.web.duplicate_groups.append({self.web.url(*w) for w in where})

    def raw_html(self, host: str, path: str, title: str, data: str, hrefs: Sequence[str]) -> None:
        """Hand-written (malformed) HTML; ``hrefs`` are the links a browser finds in it."""
        url = self.web.url(host, path)
        self.web.pages[url] = Page(
            200, HTML, data.encode(), links=_resolve_all(hrefs, url), title=title
        )

    def leaves(self, host: str, paths: Iterable[str], links: Sequence[str] = ()) -> None:
        for path in paths:
            self.html(host, path, f"{host} {path}", links)

    def section(self, host: str, prefix: str, count: int, home: str = "/") -> str:
        """A section index at ``prefix`` with ``count`` articles linking to neighbours and home."""
        index = f"{prefix}index.html"
        items = [f"{prefix}item-{i}.html" for i in range(1, count + 1)]
        self.html(host, index, f"{host} {prefix} index", [home, *items], paragraphs=1)
        for i, item in enumerate(items):
            neighbours = [items[j] for j in (i - 1, i + 1) if 0 <= j < count]
            self.html(host, item, f"{host} {prefix} article {i + 1}", [index, *neighbours, home])
        return index

    def plain(self, host: str, path: str, text: str) -> None:
        self.web.pages[self.web.url(host, path)] = Page(200, TEXT, text.encode(), title=path)

    def binary(self, host: str, path: str, content_type: str, size: int = 2048) -> None:
        """A binary file (served if requested, so a test can prove it never was)."""
        data = bytes(self.rng.getrandbits(8) for _ in range(size))
        self.web.pages[self.web.url(host, path)] = Page(200, content_type, data, title=path)

    def redirect(self, host: str, path: str, status: int, location: str) -> None:
        """A 3xx whose ``Location`` is sent as written (relative or absolute)."""
        url = self.web.url(host, path)
        target = resolve_link(location, url)
        anchor = f'<a href="{html.escape(location)}">here</a>'
        body = f"<html><head><title>Moved</title></head><body>{anchor}</body></html>"
        self.web.pages[url] = Page(
            status,
            HTML,
            body.encode(),
            redirect=target,
            headers={"Location": location},
            title="Moved",
        )

    def error(self, host: str, path: str, status: int, links: Sequence[str] = ()) -> None:
        """An error page; its links exist but must never be followed."""
        self.html(host, path, f"Error {status}", links, status=status)

    @staticmethod
    def _error_body(status: int, title: str) -> Page:
        body = f"<html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
        return Page(status, HTML, body.encode(), title=title)


def _head(
    title: str, keywords: str, description: str, base: str | None, head_links: Sequence[str]
) -> str:
    esc = html.escape
    head = ['<meta charset="utf-8">', f"<title>{esc(title)}</title>"]
    if keywords:
        head.append(f'<meta name="keywords" content="{esc(keywords)}">')
    if description:
        head.append(f'<meta name="description" content="{esc(description)}">')
    if base:
        head.append(f'<base href="{esc(base)}">')
    head += [f'<link rel="stylesheet" href="{esc(h)}">' for h in head_links]
    return "<head>\n" + "\n".join(head) + "\n</head>"


def _frameset(frames: Sequence[str]) -> str:
    tags = "\n".join(f'<frame src="{html.escape(f)}" name="f{i}">' for i, f in enumerate(frames))
    return f'<frameset cols="{",".join(["*"] * len(frames))}">\n{tags}\n</frameset>'


def _body(
    title: str,
    text: str,
    links: Sequence[str],
    images: Sequence[str],
    areas: Sequence[str],
    iframes: Sequence[str],
) -> str:
    esc = html.escape
    parts = [f"<body>\n<h1>{esc(title)}</h1>", text]
    if links:
        items = [f'<li><a href="{esc(h)}">{esc(_anchor_text(h))}</a></li>' for h in links]
        parts.append("<ul>\n" + "\n".join(items) + "\n</ul>")
    usemap = ' usemap="#regions"' if areas else ""
    parts += [f'<img src="{esc(s)}" alt="image {i}"{usemap}>' for i, s in enumerate(images)]
    if areas:
        shapes = [
            f'<area shape="rect" coords="{i * 50},0,{i * 50 + 49},49" href="{esc(h)}"'
            f' alt="region {i}">'
            for i, h in enumerate(areas)
        ]
        parts.append('<map name="regions">\n' + "\n".join(shapes) + "\n</map>")
    parts += [f'<iframe src="{esc(s)}" title="frame {i}"></iframe>' for i, s in enumerate(iframes)]
    return "\n".join(parts) + "\n</body>"


def _anchor_text(href: str) -> str:
    return href.strip().rstrip("/").rsplit("/", 1)[-1] or "home"


def _resolve_all(hrefs: Iterable[str], base: str) -> list[str]:
    """Resolve hrefs in page order, dropping non-HTTP ones and repeats."""
    out: dict[str, None] = {}
    for href in hrefs:
        url = resolve_link(href, base)
        if url is not None:
            out.setdefault(url)
    return list(out)


def not_found_page() -> Page:
    """The response for an unknown host or path."""
    return _Builder._error_body(404, "Not Found")


def build_web(name: str, port: int) -> Web:
    """Build the web ``name`` ("default", "demo" = default, "skewed") for ``port``."""
    if name in ("default", "demo"):
        web = _build_default(port)
    elif name == "skewed":
        web = _build_skewed(port)
    elif name == "politeness":
        web = _build_politeness(port)
    elif name == "overflow":
        from testweb.overflow import build_overflow  # it builds on this module

        web = build_overflow(port)
    else:
        raise ValueError(f"unknown web {name!r}; choose one of {', '.join(WEB_NAMES)}")
    web.name = name
    web._finish()
    return web


_MALFORMED = """<HTML><HEAD><TITLE>Malformed page</TITLE>
<BODY BGCOLOR=white>
<P>An unclosed paragraph with <B>bold and <I>italic text
<P>Links: <A HREF=unquoted.html>unquoted</A>
<a href='single.html'>single quotes</a>
<a
   class=nav
   href="multi-line.html">a tag over several lines</a>
<a class=nav href = "spaced-equals.html">spaces around the equals sign</a>
<table><tr><td><a href="in-table.html">a cell<td>with no closing tags
<tr><td>next row
</table>
<div><a href="entity.html?x=1&amp;y=2">an entity in the URL</a>
<a href="  padded.html  ">padded href</a>
<ul><li>first item<li><a href="list-item.html">second item</a></ul>
</BODY>
"""
_MALFORMED_HREFS = (
    "unquoted.html",
    "single.html",
    "multi-line.html",
    "spaced-equals.html",
    "in-table.html",
    "entity.html?x=1&y=2",
    "padded.html",
    "list-item.html",
)


def _build_default(port: int) -> Web:
    """About 200 pages on 11 hostnames (10 IPs): every trap the crawl tests look for."""
    web = Web("default", port, {}, {}, {}, [])
    b = _Builder(web, seed=20240611)
    p = port
    hosts = [
        "h00.test",
        "h01.test",
        "h02.test",
        "h03.test",
        "h04.test",
        "h05.test",
        "h06.test",
        "h07.test",
        "h08.test",
        "slow.test",
    ]

    # h00: the first seed; its home links only to its own site (so depth=0 gives just seeds).
    b.host(
        "h00.test",
        "127.0.1.1",
        "User-agent: badbot\nDisallow: /\n\n"
        "User-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\n",
    )
    blog = b.section("h00.test", "/blog/", 20)
    b.html(
        "h00.test",
        "/",
        "h00 home",
        [
            "/about.html",
            "/hosts.html",
            "/kinds/a/b/page.html",
            "/files.html",
            "/private/secret.html",
            blog,
        ],
        paragraphs=2,
    )
    b.html(
        "h00.test",
        "/about.html",
        "About the h00 test site",
        ["/", "/cgi-bin/search?q=crawler"],
        keywords="crawler, larbin, scrapy",
        description="A page with a title, keywords and a description.",
        paragraphs=3,
    )
    b.html("h00.test", "/private/secret.html", "Secret", ["/private/more.html", "/"])
    b.leaves("h00.test", ["/private/more.html", "/cgi-bin/search?q=crawler"])
    b.html(
        "h00.test",
        "/hosts.html",
        "All hosts",
        [f"http://{h}:{p}/" for h in hosts[1:]]
        + [f"http://alias01.test:{p}/", f"http://h02.test:{p}"],
    )
    long_path = "/long/" + "/".join(f"part{i:02d}" for i in range(80)) + ".html"
    b.html(
        "h00.test",
        "/kinds/a/b/page.html",
        "Every kind of relative link",
        [
            "./sibling.html",
            "child/leaf.html",
            "../up.html",
            "../../../../../top.html",
            "/root.html",
            f"//h01.test:{p}/proto.html",
            f"http://h00.test:{p}/absolute.html",
            "sibling.html#part2",
            "#top",
            "?page=2",
            "list.html?a=1&b=2",
            "mailto:webmaster@h00.test",
            "javascript:void(0)",
            "javascript:window.open('/popup.html')",
            f"http://h02.test:{p}",
            long_path,
        ],
    )
    b.leaves(
        "h00.test",
        [
            "/kinds/a/b/sibling.html",
            "/kinds/a/b/child/leaf.html",
            "/kinds/a/up.html",
            "/top.html",
            "/root.html",
            "/absolute.html",
            "/kinds/a/b/page.html?page=2",
            "/kinds/a/b/list.html?a=1&b=2",
            "/popup.html",
            long_path,
        ],
        ["/"],
    )
    b.html(
        "h00.test",
        "/files.html",
        "Files",
        [
            "/docs/report.pdf",
            "/photos/Holiday.JPG",
            "/dist/archive.zip",
            "/dist/source.tar.gz",
            "/get.php?f=report.pdf",
            "/notes.txt",
        ],
        images=["/img/logo.png", "/img/banner.webp"],
    )
    b.binary("h00.test", "/docs/report.pdf", "application/pdf")
    b.binary("h00.test", "/photos/Holiday.JPG", "image/jpeg")
    b.binary("h00.test", "/dist/archive.zip", "application/zip")
    b.binary("h00.test", "/dist/source.tar.gz", "application/gzip")
    b.binary("h00.test", "/img/logo.png", "image/png", 512)
    b.binary("h00.test", "/img/banner.webp", "image/webp", 512)
    b.html("h00.test", "/get.php?f=report.pdf", "Download report", ["/"])
    b.plain("h00.test", "/notes.txt", "Plain text notes.\nNothing here is a link.\n")

    # h01 and alias01: one IP, two distinct sites with the same paths.
    b.host(
        "h01.test",
        "127.0.1.2",
        "User-agent: larbinscrapy\nDisallow: /nolarbin/\n\nUser-agent: *\nDisallow: /\n",
    )
    guide = b.section("h01.test", "/guide/", 12)
    b.html(
        "h01.test", "/", "h01 home", [guide, "/nolarbin/page.html", "/same-path.html"], paragraphs=2
    )
    b.html("h01.test", "/proto.html", "h01 reached by a protocol-relative link")
    b.leaves("h01.test", ["/nolarbin/page.html", "/same-path.html"], ["/"])
    b.host("alias01.test", "127.0.1.2", "User-agent: *\nDisallow: /private/\n")
    b.html(
        "alias01.test",
        "/",
        "alias01 home",
        ["/same-path.html", "/private/x.html", "/alias-only.html"],
    )
    b.leaves("alias01.test", ["/same-path.html", "/private/x.html", "/alias-only.html"], ["/"])

    # h02: content duplicates and an Allow inside a disallowed tree.
    b.host(
        "h02.test", "127.0.1.3", "User-agent: *\nAllow: /private/open.html\nDisallow: /private/\n"
    )
    b.html(
        "h02.test",
        "/",
        "h02 home",
        [
            "/dup/a.html",
            "/dup/a-copy.html",
            "/mirror/dup/a.html",
            "/private/open.html",
            "/private/closed.html",
            b.section("h02.test", "/shop/", 15),
        ],
        paragraphs=2,
    )
    b.html(
        "h02.test",
        "/dup/a.html",
        "Duplicated article",
        ["/"],
        paragraphs=3,
        also_at=[("h02.test", "/dup/a-copy.html"), ("h02.test", "/mirror/dup/a.html")],
    )
    b.leaves("h02.test", ["/private/open.html", "/private/closed.html"], ["/"])

    # h03: Crawl-delay 1, so few pages.
    b.host("h03.test", "127.0.1.4", "User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n")
    b.html("h03.test", "/", "h03 home", ["/a.html", "/b.html", "/private/p.html"])
    b.leaves("h03.test", ["/a.html", "/b.html", "/private/p.html"], ["/"])

    # h04 (robots.txt 404: everything allowed) and h05 (garbage robots.txt) share a duplicate.
    b.host("h04.test", "127.0.1.5", None)
    b.html(
        "h04.test",
        "/",
        "h04 home",
        ["/news/today.html", "/private/page.html", b.section("h04.test", "/archive/", 15)],
        paragraphs=2,
    )
    b.html(
        "h04.test",
        "/news/today.html",
        "Today's news",
        paragraphs=4,
        also_at=[("h05.test", "/news/today.html")],
    )
    b.html("h04.test", "/from-deep.html", "h04 reached from a deep page on h08")
    b.leaves("h04.test", ["/private/page.html"], ["/"])
    garbage = bytes(c for c in random.Random(5).randbytes(400) if c not in b":\r")
    b.host("h05.test", "127.0.1.6", "")
    web.robots["h05.test"] = Page(
        200, HTML, b"<html><body>\x00" + garbage + b"</body></html>", title="garbage"
    )
    b.html(
        "h05.test",
        "/",
        "h05 home",
        ["/news/today.html", "/private/page.html", b.section("h05.test", "/forum/", 15)],
        paragraphs=2,
    )
    b.leaves("h05.test", ["/private/page.html"], ["/"])

    # h06: frames, iframes, <base href>, <area href>, <link href>, malformed HTML.
    b.host("h06.test", "127.0.1.7", "User-agent: *\nDisallow:\n")
    b.html(
        "h06.test",
        "/",
        "h06 home",
        [
            "/frames/index.html",
            "/base/page.html",
            "/map.html",
            "/malformed.html",
            b.section("h06.test", "/docs/", 12),
        ],
        head_links=["/style.css"],
        paragraphs=2,
    )
    web.pages[web.url("h06.test", "/style.css")] = Page(
        200, "text/css", b"body { margin: 0 }\n", title="css"
    )
    b.html("h06.test", "/frames/index.html", "A frameset", frames=["menu.html", "content.html"])
    b.html("h06.test", "/frames/menu.html", "Frame menu", ["chapter1.html", "/"])
    b.html("h06.test", "/frames/content.html", "Frame content", iframes=["inner.html"])
    b.leaves("h06.test", ["/frames/inner.html", "/frames/chapter1.html"])
    b.html(
        "h06.test",
        "/base/page.html",
        "A page with a base href",
        ["intro.html", "../v1/old.html", "/absolute-root.html"],
        base=f"http://h06.test:{p}/manual/v2/",
    )
    b.leaves("h06.test", ["/manual/v2/intro.html", "/manual/v1/old.html", "/absolute-root.html"])
    b.html(
        "h06.test",
        "/map.html",
        "An image map",
        areas=["/regions/north.html", "south.html"],
        images=["/img/map.webp"],
    )
    b.binary("h06.test", "/img/map.webp", "image/webp", 512)
    b.leaves("h06.test", ["/regions/north.html", "/south.html"])
    b.raw_html("h06.test", "/malformed.html", "Malformed page", _MALFORMED, _MALFORMED_HREFS)
    b.leaves("h06.test", [f"/{h.strip()}" for h in _MALFORMED_HREFS])

    # h07: the second seed, a redirect itself; chains, a loop, error pages, plain text.
    b.host("h07.test", "127.0.1.8", "User-agent: *\nDisallow: /private/\n")
    b.redirect("h07.test", "/", 302, "/home.html")
    b.html(
        "h07.test",
        "/home.html",
        "h07 home",
        [
            "/old-page.html",
            "/loop/a.html",
            "/missing.html",
            "/broken.html",
            "/readme.txt",
            "/index.html",
        ],
        paragraphs=2,
        also_at=[("h07.test", "/index.html")],
    )
    b.redirect("h07.test", "/old-page.html", 301, f"http://h07.test:{p}/older-page.html")
    b.redirect("h07.test", "/older-page.html", 302, "/new-page.html")
    b.html("h07.test", "/new-page.html", "The end of a redirect chain", ["/after-chain.html"])
    b.redirect("h07.test", "/loop/a.html", 301, "/loop/b.html")
    b.redirect("h07.test", "/loop/b.html", 302, "/loop/a.html")
    b.error("h07.test", "/missing.html", 404, ["/only-from-404.html"])
    b.error("h07.test", "/broken.html", 500, ["/only-from-500.html"])
    b.leaves(
        "h07.test",
        ["/after-chain.html", "/only-from-404.html", "/only-from-500.html"],
        ["/home.html"],
    )
    b.plain("h07.test", "/readme.txt", "A plain text file.\n")

    # h08: a deep chain (site depth 1..10), a cross-host link from deep inside, a duplicate pair.
    b.host("h08.test", "127.0.1.9", "User-agent: *\nDisallow: /private/\n")
    b.html(
        "h08.test", "/", "h08 home", ["/deep/1.html", "/article-7.html", "/print/article.html?id=7"]
    )
    for i in range(1, 11):
        links = ["/"] + ([f"/deep/{i + 1}.html"] if i < 10 else [])
        links += [f"http://h04.test:{p}/from-deep.html"] if i == 5 else []
        b.html("h08.test", f"/deep/{i}.html", f"Depth {i}", links)
    b.html(
        "h08.test",
        "/article-7.html",
        "Article 7",
        ["/"],
        paragraphs=3,
        also_at=[("h08.test", "/print/article.html?id=7")],
    )

    # slow.test: every response delayed by the server's --slow-delay.
    b.host("slow.test", "127.0.1.10", "User-agent: *\nDisallow:\n")
    b.html("slow.test", "/", "A slow host", ["/slow-page.html"])
    b.leaves("slow.test", ["/slow-page.html"])
    web.slow_ips.add("127.0.1.10")

    web.seeds = [web.url("h00.test"), web.url("h07.test")]
    return web


def _build_skewed(port: int) -> Web:
    """One big host (600 pages, a 5-ary tree) and ten small hosts of ten pages, for starvation."""
    web = Web("skewed", port, {}, {}, {}, [])
    b = _Builder(web, seed=7)
    small = [f"small{i}.test" for i in range(10)]
    b.host("big.test", "127.0.2.1", "User-agent: *\nDisallow:\n")
    total = 600
    for n in range(total):
        children = [f"/t/{c}.html" for c in range(5 * n + 1, min(5 * n + 6, total))]
        path = "/" if n == 0 else f"/t/{n}.html"
        extra = [f"http://{h}:{port}/" for h in small] if n == 0 else []
        b.html("big.test", path, f"big {n}", children + extra)
    for i, host in enumerate(small):
        b.host(host, f"127.0.2.{i + 2}", "User-agent: *\nDisallow:\n")
        pages = [f"/p{k}.html" for k in range(1, 10)]
        b.html(host, "/", f"{host} home", pages)
        b.leaves(host, pages, ["/"])
    web.seeds = [web.url("big.test")]
    return web


POLITENESS_FAST_HOSTS = [f"fast{i:02d}.test" for i in range(18)]
POLITENESS_SLOW_HOSTS = ["slow0.test", "slow1.test"]


def _build_politeness(port: int) -> Web:
    """18 fast hosts of 15 pages and 2 slow ones (10% of hosts), plus ``robots.test``.

    For the politeness tests: the slow IPs answer after ``--slow-delay``; ``robots.test`` has
    30 allowed and 30 ``/private/`` (disallowed) pages, all leaves, meant to be seeded at once
    so that many requests wait on one robots.txt.
    """
    web = Web("politeness", port, {}, {}, {}, [])
    b = _Builder(web, seed=6)
    for i, host in enumerate(POLITENESS_FAST_HOSTS):
        b.host(host, f"127.0.3.{i + 1}", "User-agent: *\nDisallow: /private/\n")
        pages = [f"/p{k}.html" for k in range(1, 15)]
        b.html(host, "/", f"{host} home", pages)
        b.leaves(host, pages, ["/"])
    for i, host in enumerate(POLITENESS_SLOW_HOSTS):
        ip = f"127.0.3.{len(POLITENESS_FAST_HOSTS) + i + 1}"
        b.host(host, ip, "User-agent: *\nDisallow:\n")
        b.html(host, "/", f"{host} home")
        web.slow_ips.add(ip)
    b.host("robots.test", "127.0.3.30", "User-agent: *\nDisallow: /private/\n")
    b.leaves("robots.test", [f"/pub/{k}.html" for k in range(30)])
    b.leaves("robots.test", [f"/private/{k}.html" for k in range(30)])
    web.seeds = [web.url(h) for h in POLITENESS_FAST_HOSTS + POLITENESS_SLOW_HOSTS]
    return web
