"""Tables of cases for larbinscrapy.parse.links, and agreement with Scrapy's LinkExtractor."""

from __future__ import annotations

import random
import time
from urllib.parse import urljoin

import pytest
from scrapy.http import HtmlResponse
from scrapy.linkextractors import LinkExtractor
from w3lib.url import safe_url_string

from larbinscrapy.parse import links
from larbinscrapy.parse.links import Page, extract, robots_directives

PAGE = "http://a.com/b/c.html"


def links_of(html: str | bytes, base: str = PAGE, **kwargs: object) -> list[str]:
    return extract(html, base, **kwargs).links  # type: ignore[arg-type]


# (href value as written in the page, the link expected from <a href="...">, None: dropped)
RESOLVE = [
    ("x.html", "http://a.com/b/x.html"),
    ("./x", "http://a.com/b/x"),
    ("../x", "http://a.com/x"),
    ("../../../x", "http://a.com/x"),
    ("x/./y/../z", "http://a.com/b/x/z"),
    (".", "http://a.com/b/"),
    ("..", "http://a.com/"),
    ("/x", "http://a.com/x"),
    ("/x/../y", "http://a.com/y"),
    ("//h.com/x", "http://h.com/x"),
    ("?q=1", "http://a.com/b/c.html?q=1"),
    ("", "http://a.com/b/c.html"),
    ("#f", "http://a.com/b/c.html"),
    ("x.html#f", "http://a.com/b/x.html"),
    ("http://other.com/p", "http://other.com/p"),
    ("https://other.com/p?x=1#f", "https://other.com/p?x=1"),
    ("HTTPS://Other.COM/P", "https://other.com/P"),
    ("http://other.com", "http://other.com"),
    ("http://other.com?q", "http://other.com/?q"),
    ("  /x \n", "http://a.com/x"),
    ("/a b", "http://a.com/a%20b"),
    ("/caf\u00e9", "http://a.com/caf%C3%A9"),
    ("x?a=1&amp;b=2", "http://a.com/b/x?a=1&b=2"),
    ("x?a=1&reg=2", "http://a.com/b/x?a=1&reg=2"),  # no "&reg" entity before "="
    ("x?a=&copy;", "http://a.com/b/x?a=%C2%A9"),
    ("&#47;x", "http://a.com/x"),
    ("/x&#x3f;y", "http://a.com/x?y"),
    ("mailto:x@y.com", None),
    ("javascript:void(0)", None),
    ("JavaScript:go()", None),
    ("data:text/html,<b>x</b>", None),
    ("tel:+15551234", None),
    ("ftp://a.com/f", None),
    ("news:comp.lang", None),
    ("http://[bad/", None),
]


@pytest.mark.parametrize(("href", "expected"), RESOLVE)
def test_resolve(href: str, expected: str | None) -> None:
    assert links_of(f'<a href="{href}">x</a>') == ([expected] if expected else [])


TRICKY_VALUES = [
    "a//b",
    # "../" chains: concatenated from the base's directories unless a dot segment follows
    "../x/y.html",
    "../../x",
    "../../../../../x",
    "../.x",
    "../..",
    "../../",
    "../x/.",
    "..././x",
    "../x?q=/../y",
    "../x/../y",
    "x/../../../../y",
    "..//x",
    "../;x",
    "../x;y",
    "../../.",
    ".../x",
    "./",
    "../",
    "x/.",
    "x/..",
    "/..",
    "/./x",
    "//h.com/a/../b",
    "http://h.com/a/./b",
    "x?",
    "/x?",
    "http://h.com/x?",
    "x?q=/../y",
    "x;p",
    "x;p/../y",
    "http:x",
    "?",
    ".hidden",
    "a/.b/c",
    "%2e%2e/x",
    "/a\\b",
    "x\ty",
]
BASES = [
    "http://a.com/b/c.html",
    "http://a.com",
    "http://a.com/b/c/",
    "https://a.com/b/c?q=1",
    "http://a.com//b//c.html",
    "http://a.com/b/../c/d.html",
    "http://a.com:8080/b;p/c",
]


def test_random_dot_dot_chains_agree_with_urljoin() -> None:
    rng = random.Random(18)
    parts = ["..", ".", "x", "", "y.html", "...", ".z", "q?a=../b"]
    bases = [f"http://a.com/{'d/' * depth}p.html" for depth in range(5)]
    for _ in range(5000):
        tail = "/".join(rng.choice(parts) for _ in range(rng.randrange(4)))
        href = "../" * rng.randrange(6) + tail
        base = rng.choice(bases)
        expected = safe_url_string(urljoin(base, href))
        assert links_of(f'<a href="{href}">x</a>', base) == [expected], (base, href)


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("href", TRICKY_VALUES)
def test_resolution_agrees_with_urljoin(base: str, href: str) -> None:
    # LinkExtractor's recipe: strip, urljoin, safe_url_string (fragments dropped here).
    expected = safe_url_string(urljoin(base, href.strip()))
    valid = expected.startswith(("http://", "https://"))  # LinkExtractor drops "http:x" too
    assert links_of(f'<a href="{href}">x</a>', base) == ([expected] if valid else [])


TAGS = [
    ('<a href="x">', ["x"]),
    ("<A HREF='x'>", ["x"]),
    ("<a href=x>", ["x"]),
    ("<a href = x >", ["x"]),
    ('<a\nclass="c"\n  href\n=\n"x"\n>', ["x"]),
    ('<a class="nav" id=1 href="x" title="t">', ["x"]),
    ('<a title="a>b" href="x">', ["x"]),
    ('<a onclick="if (a<b && c>d) go()" href="x">', ["x"]),
    ('<a title="<b>bold</b>" href="x">', ["x"]),
    ("<a title='say \"hi\"' href=x>", ["x"]),
    ('<a data-href="no" href="x">', ["x"]),
    ('<a hreflang=en href="x">', ["x"]),
    ('<a href="x" href="y">', ["x"]),
    ("<a href=x/>", ["x/"]),
    ('<area shape=rect coords="0,0,1,1" href="x">', ["x"]),
    ('<link rel="stylesheet" href="x.css">', ["x.css"]),
    ('<link rel=alternate hreflang=fr href="x">', ["x"]),
    ('<link rel="canonical" href="x">', ["x"]),
    ('<frame name=f src="x">', ["x"]),
    ('<iframe src="x" width=1></iframe>', ["x"]),
    ('<img src="x.png">', []),
    ('<script src="x.js"></script>', []),
    ('<a name="top">', []),
    ('<abbr href="x">', []),
    ('<address href="x">', []),
    ('<a src="x">', []),
    ('<frame href="x">', []),
    ("<!-- <a href=x> -->", []),
    ("<!-- a --><a href=x><!-- <a href=y> -->", ["x"]),
    ("<script>var s = '<a href=\"x\">';</script><a href=y>", ["y"]),
    ("<SCRIPT type=text/javascript>document.write('<a href=x>')</SCRIPT ><a href=y>", ["y"]),
    ("<style>a[href='x'] {}</style><a href=y>", ["y"]),
    ("<noscript><a href=x></noscript>", ["x"]),
    ("<p><a href=x>1</a> and <a href=y>2</a> and <a href=x>3</a>", ["x", "y"]),
    ("<a href=x#a><a href=x#b>", ["x"]),
    # a first href="..." is read by the scan itself: the same value as the attribute matcher's
    ('<a\n\thref="x">', ["x"]),
    ('<a/href="x">', ["x"]),
    ('<a href = "x" href="y">', ["x"]),
    ('<a HREF="x"title="t">', ["x"]),
    ('<a href="x"/>', ["x"]),
    ('<a href="">', [""]),
    ('<a href="  x  ">', ["x"]),
    ('<iframe href="no" src="x">', ["x"]),
    ('<base href="/d/"><a href="x">', ["/d/x"]),
]


@pytest.mark.parametrize(("html", "expected"), TAGS)
def test_tags(html: str, expected: list[str]) -> None:
    assert links_of(html) == [urljoin(PAGE, e) for e in expected]


@pytest.mark.parametrize(
    ("html", "expected"),
    [('<a href="x<y" title=t>', "x%3Cy"), ('<a href="x>y">', "x%3Ey"), ('<a href="x\'y">', "x'y")],
)
def test_brackets_and_quotes_in_a_first_href(html: str, expected: str) -> None:
    assert links_of(html) == [urljoin(PAGE, expected)]


def test_the_scans_own_href_is_the_attribute_matchers() -> None:
    """Group 3 (a first ``href="..."``) must be what ``_HREF`` finds in the tag's attributes."""
    rng = random.Random(18)
    attrs = [
        'href="/a b"',
        "href='/q'",
        "href=/u",
        'HREF="/U"',
        'href = "/s"',
        'href="/<x"',
        'href="/>x"',
        'src="/s"',
        'rel="nofollow"',
        'title="x>y"',
        "title='<'",
        "class=a",
        "/",
        "href",
        "href=",
        'data-href="/no"',
        'hrefx="/no"',
        'href="&amp;x"',
        '"',
        "'",
        "<",
        "=",
        '\n href="/nl"',
        '\thref\t=\t"/tab"',
    ]
    tags = ["a", "A", "area", "link", "frame", "iframe", "base", "img", "meta", "p", "/a"]
    separators, ends = [" ", "\n", "/", ""], [">", "", "/>"]
    checked = 0
    for _ in range(3000):
        html = "".join(
            "<"
            + rng.choice(tags)
            + rng.choice(separators)
            + " ".join(rng.choice(attrs) for _ in range(rng.randrange(4)))
            + rng.choice(ends)
            + "text"
            for _ in range(rng.randrange(1, 12))
        )
        for m in links._SCAN_IMAGES.finditer(html):
            if m.lastindex == links._LINK and m.group(3) is not None:
                a = links._HREF(m.group(2))
                assert a is not None and links._value(a) == m.group(3), html
                checked += 1
    assert checked > 1000  # the shapes above do reach the shortcut


def test_images_only_when_asked() -> None:
    html = '<img src="i.png"><IMG alt=x SRC=j.gif><a href="p.html">'
    assert links_of(html) == ["http://a.com/b/p.html"]
    assert links_of(html, images=True) == [
        "http://a.com/b/i.png",
        "http://a.com/b/j.gif",
        "http://a.com/b/p.html",
    ]


def test_frames() -> None:
    html = """<html><head><title>Frames</title></head>
<frameset cols="20%,80%">
  <FRAME SRC="menu.html" NAME=menu>
  <frame name="main" src='/main/index.html'>
  <frameset rows="50%,50%"><frame src="http://b.com/ad.html"></frameset>
  <noframes><body><a href="noframes.html">No frames</a></body></noframes>
</frameset></html>"""
    page = extract(html, "http://a.com/site/")
    assert page.links == [
        "http://a.com/site/menu.html",
        "http://a.com/main/index.html",
        "http://b.com/ad.html",
        "http://a.com/site/noframes.html",  # lxml drops <noframes>; browsers without frames don't
    ]
    assert page.title == "Frames"


BASE_TAG = [
    # the first <base> is the base of every link of the page, those before it too
    ('<a href=x><base href="http://b.com/d/"><a href=y>', ["http://b.com/d/x", "http://b.com/d/y"]),
    ('<base href="/sub/"><a href=y><a href=/z>', ["http://a.com/sub/y", "http://a.com/z"]),
    ('<base href="../up/"><a href=y>', ["http://a.com/up/y"]),
    ('<base href="http://b.com/d/"><base href="http://c.com/"><a href=y>', ["http://b.com/d/y"]),
    ('<base target=_top><base href="http://b.com/"><a href=y>', ["http://b.com/y"]),
    ('<base href="http://b.com/d/e.html?q#f"><a href="?r">', ["http://b.com/d/e.html?r"]),
    ('<base href="mailto:x@y"><a href=y>', ["http://a.com/b/y"]),
    ('<!-- <base href="http://b.com/"> --><a href=y>', ["http://a.com/b/y"]),
]


@pytest.mark.parametrize(("html", "expected"), BASE_TAG)
def test_base(html: str, expected: list[str]) -> None:
    assert links_of(html) == expected


TITLES = [
    ("<title>Hello</title>", "Hello"),
    ("<TITLE lang=en>  Hello \n\t World  </TITLE>", "Hello World"),
    ("<title>Fish &amp; Chips &eacute;&#233;&nbsp;x</title>", "Fish & Chips \u00e9\u00e9 x"),
    ("<title></title>", None),
    ("<title>   </title>", None),
    ("<p>no title</p>", None),
    ("<title>first</title><title>second</title>", "first"),
    ("<!-- <title>hidden</title> --><title>shown</title>", "shown"),
    ("<svg><title>icon</title></svg>", "icon"),
    ("<title>unclosed", "unclosed"),
]


@pytest.mark.parametrize(("html", "expected"), TITLES)
def test_title(html: str, expected: str | None) -> None:
    assert extract(html, PAGE).title == expected


METAS = [
    ('<meta name="keywords" content="a, b">', "a, b", None),
    ("<META CONTENT='d &amp; e' NAME=Description>", None, "d & e"),
    ('<meta name=keywords content="k1"><meta name=description content="d1">', "k1", "d1"),
    ('<meta name=keywords content="first"><meta name=keywords content="second">', "first", None),
    ('<meta http-equiv="content-type" content="text/html">', None, None),
    ('<meta name="description">', None, None),
    ('<meta\n  name = "description"\n  content = "multi\n  line" />', None, "multi line"),
    ('<meta property="og:description" content="og">', None, None),
]


@pytest.mark.parametrize(("html", "keywords", "description"), METAS)
def test_meta(html: str, keywords: str | None, description: str | None) -> None:
    page = extract(html, PAGE)
    assert (page.keywords, page.description) == (keywords, description)


def test_page_is_a_named_tuple() -> None:
    page = extract(b"<title>t</title><a href=x>", PAGE)
    assert isinstance(page, Page)
    links, title, keywords, description, robots, canonical, nofollow = page
    assert (links, title, keywords, description) == (["http://a.com/b/x"], "t", None, None)
    assert (robots, canonical, nofollow) == (frozenset(), None, ())


ENCODINGS = [
    ("utf-8", "/caf\u00e9?q=\u00e9", "http://a.com/caf%C3%A9?q=%C3%A9"),
    ("cp1252", "/caf\u00e9?q=\u00e9", "http://a.com/caf%C3%A9?q=%E9"),  # path UTF-8, query page's
    ("latin-1", "/\u00fcber", "http://a.com/%C3%BCber"),
    ("utf-16", "/caf\u00e9", "http://a.com/caf%C3%A9"),
    ("no-such-codec", "/x", "http://a.com/x"),
]


@pytest.mark.parametrize(("encoding", "href", "expected"), ENCODINGS)
def test_encodings(encoding: str, href: str, expected: str) -> None:
    html = f'<title>Caf\u00e9</title><a href="{href}">x</a>'
    body = html.encode(encoding if encoding != "no-such-codec" else "utf-8")
    page = extract(body, PAGE, encoding=encoding)
    assert page.links == [expected]
    if encoding != "no-such-codec":
        assert page.title == "Caf\u00e9"


def test_str_body() -> None:
    assert links_of('<a href="/\u00e9">') == ["http://a.com/%C3%A9"]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert links_of(b'<a href="/a\xffb">x</a>') == ["http://a.com/a%EF%BF%BDb"]


MALFORMED = [
    b"<a href=",
    b'<a href="',
    b"<a href='x",
    b"<a",
    b"<",
    b"<!--",
    b"<!-- <a href=x>",
    b"<script>",
    b"<title>",
    b"<meta name=keywords content=",
    b"<base href=",
    b"\x00<a\x00href=x\x00>",
    b'<a href="x\x00y">',
    b"\xff\xfe<\xff>",
    b"<a href=http://[::1>",
    b"<a href=http://a.com:99999999999/>",
    b"<a href=http://a.com:port/>",
    b"<a href=" + b"x" * 1_000_000 + b">",
    b'<a title="' + b"y" * 1_000_000 + b'" href=x>',
    b"<img src='data:image/png;base64," + b"A" * 500_000 + b"'>",
]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b[:30]))
def test_malformed_markup_never_raises(body: bytes) -> None:
    page = extract(body, PAGE, images=True)
    assert all(u.startswith(("http://", "https://")) for u in page.links)


@pytest.mark.parametrize(
    "body",
    [
        b'<a "' * 50_000,
        b"<a " * 50_000,
        b"<!--" * 50_000,
        b"<script" * 50_000,
        b"<a href='" * 50_000,
        b"<title>" * 50_000,
        b"<meta " * 50_000,
        b'<a title="<' * 50_000,
    ],
    ids=["quote", "a", "comment", "script", "href-quote", "title", "meta", "quote-lt"],
)
def test_scan_is_linear_on_hostile_input(body: bytes) -> None:
    start = time.process_time()
    extract(body, PAGE)
    assert time.process_time() - start < 5  # a quadratic scan of these would take minutes


TOKENS = [
    b"<a href=",
    b"<A HREF='",
    b'"',
    b"'",
    b">",
    b"<",
    b"<!--",
    b"-->",
    b"<script>",
    b"</script>",
    b"<base href=",
    b"<frame src=",
    b"<title>",
    b"</title>",
    b"<meta name=keywords content=",
    b"&amp;",
    b"&#",
    b"http://",
    b"//",
    b"../",
    b"/./",
    b"?",
    b"#",
    b"\x00",
    b"\xff",
    b" ",
    b"\n",
    b"x",
    b"mailto:",
    b"http://[",
    b":80",
    b"=",
]


def test_random_bytes_never_raise() -> None:
    rng = random.Random(1994)
    for _ in range(300):
        if rng.random() < 0.5:
            body = rng.randbytes(rng.randrange(1, 400))
        else:
            body = b"".join(
                rng.choice(TOKENS) if rng.random() < 0.7 else rng.randbytes(rng.randrange(1, 8))
                for _ in range(rng.randrange(1, 80))
            )
        encoding = rng.choice(["utf-8", "cp1252", "latin-1", "utf-16"])
        page = extract(body, PAGE, images=rng.random() < 0.5, encoding=encoding)
        assert all(u.startswith(("http://", "https://")) for u in page.links)
        assert len(page.links) == len(set(page.links))


# Realistic pages whose only link-bearing tags are <a> and <area> (LinkExtractor's defaults).
REAL_PAGES = [
    (
        "http://www.example.com/news/index.html",
        "utf-8",
        """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>News &amp; Views</title>
<meta name="description" content="Daily news">
<script src="/js/app.js"></script>
<script>var tpl = '<a href="/template">';</script>
<style>.nav a[href$=".pdf"] { color: red }</style>
</head><body>
<header><nav class="top">
  <a href="/">Home</a> | <a href="/news/">News</a> | <A HREF="../about.html">About</A>
  <a href="https://www.example.com/login?next=%2Fnews%2F&amp;lang=en">Log in</a>
</nav></header>
<main>
<article><h2><a href="2024/06/story-1.html#comments" class="headline">Story one</a></h2>
<p>Text with <a href='http://other.org/path/page.php?id=12&amp;cat=3'>a source</a>
and <a href=relative/page.html>an unquoted one</a>.</p>
<!-- <a href="/hidden-in-comment">hidden</a> -->
<p><a href="mailto:editor@example.com">mail</a> <a href="javascript:void(0)">js</a>
<a href="#top">top</a> <a href="tel:+123">call</a></p>
<img src="/img/logo.png" alt="logo">
<a href="./story-2.html"><img src="thumb.jpg"></a>
<a href="//cdn.example.net/static/file.pdf">PDF</a>
<a href=" /spaces/around.html ">spaces</a>
<a href="/search?q=caf\u00e9 cr\u00e8me">search</a>
<a href="/a/b/../../c/./d.html">dots</a>
<a href="?page=2">next</a>
</article></main>
<footer><a href="/news/">News again</a><a href="/privacy#cookies">Privacy</a></footer>
</body></html>""",
    ),
    (
        "http://maps.example.org/city/plan.html",
        "utf-8",
        """<html><head><title>City map</title></head><body>
<img src="plan.gif" usemap="#plan">
<map name="plan">
  <area shape="rect" coords="0,0,10,10" href="north.html" alt="North">
  <AREA SHAPE=circle COORDS="20,20,5" HREF="/districts/south.html" ALT=South>
  <area shape="poly" coords="1,2,3,4" href="http://maps.example.org/east.html">
  <area shape="default" nohref>
</map>
<ul><li><a href="../index.html">Up</a><li><a href="plan.html?zoom=2&amp;x=1">Zoom</a></ul>
</body></html>""",
    ),
    (
        "http://docs.example.com/guide/v2/intro.html",
        "utf-8",
        """<html><head><base href="http://docs.example.com/guide/v2/"><title>Guide</title>
</head><body>
<p><a href="install.html">Install</a> <a href="../v1/intro.html">Old version</a>
<a href="/">Docs home</a> <a href="api/index.html#section-3">API</a>
<a href="https://github.com/example/project">Source</a></p>
<table><tr><td><a href="faq.html"
   title="Frequently asked">FAQ</a></td><td><a
   href="changes.html">Changes</a></td></tr></table>
</body></html>""",
    ),
    (
        "http://www.example.fr/boutique/produits.html",
        "cp1252",
        """<html><head><title>Produits \u00e9t\u00e9</title></head><body>
<a href="/cat\u00e9gorie/\u00e9t\u00e9.html">\u00c9t\u00e9</a>
<a href="recherche?q=cr\u00e8me&amp;tri=prix">Cr\u00e8me</a>
<a href="http://www.example.fr/panier">Panier</a>
<a href="../contact.html">Contact</a>
</body></html>""",
    ),
    (
        "https://shop.example.com/list?page=3&sort=price",
        "utf-8",
        """<HTML><BODY BGCOLOR=white>
<A HREF=item?id=1>One</A> <A HREF='item?id=2'>Two</A> <A href="item?id=3" TARGET=_blank>3</A>
<P><A NAME=bottom></A><A HREF="?page=4&amp;sort=price">Next</A>
<A HREF="HTTP://Shop.Example.COM/Cart">Cart</A>
<A HREF="http://shop.example.com:443/secure">Port</A>
<A HREF="list?page=3&amp;sort=price">Self</A>
</BODY></HTML>""",
    ),
]


@pytest.mark.parametrize(("url", "encoding", "html"), REAL_PAGES, ids=lambda x: str(x)[:40])
def test_same_links_as_link_extractor(url: str, encoding: str, html: str) -> None:
    body = html.encode(encoding)
    response = HtmlResponse(url, body=body, encoding=encoding)
    extractor = LinkExtractor(
        deny_extensions=[], unique=True, canonicalize=False, tags=("a", "area")
    )
    theirs = [link.url.partition("#")[0] for link in extractor.extract_links(response)]
    theirs = [u for u in dict.fromkeys(theirs) if u.startswith(("http://", "https://"))]
    ours = extract(body, url, encoding=encoding).links
    assert ours == theirs
    assert len(ours) >= 4


@pytest.mark.parametrize(
    ("html_text", "expected"),
    [
        ('<meta http-equiv="refresh" content="0; url=/next.html">', ["http://h.test/next.html"]),
        ("<META HTTP-EQUIV=Refresh CONTENT=\"5;URL='http://o.test/a'\">", ["http://o.test/a"]),
        ('<meta http-equiv="refresh" content="5, url=page2.html">', ["http://h.test/d/page2.html"]),
        (
            '<meta http-equiv="refresh" content="5; url=&quot;q.html&quot;">',
            ["http://h.test/d/q.html"],
        ),
        ('<meta http-equiv="refresh" content="5">', []),  # a reload, no target
        ('<meta http-equiv="refresh" content="0; url=javascript:go()">', []),
        ('<meta name="refresh" content="0; url=/x">', []),  # only http-equiv means refresh
    ],
)
def test_meta_refresh_target_is_a_link(html_text, expected):
    # Followed as a link, so Scrapy's MetaRefreshMiddleware (it decodes every body) is off.
    assert extract(html_text.encode(), "http://h.test/d/p.html").links == expected


# -- robots meta, rel=nofollow, canonical (issue #14, item 8) ------------------------------------
ROBOTS_META = [
    ('<meta name="robots" content="noindex">', {"noindex"}),
    ('<meta name="ROBOTS" content="NoFollow, noarchive">', {"nofollow", "noarchive"}),
    ('<meta name="robots" content="none">', {"noindex", "nofollow"}),
    ('<meta name="larbinscrapy" content="nofollow">', {"nofollow"}),  # the bot's own name
    ('<meta name="googlebot" content="noindex">', set()),  # another robot's
    ('<meta content="noindex" name=robots>', {"noindex"}),
    ('<meta name="robots" content="index, follow">', {"index", "follow"}),
    (
        '<meta name="robots" content="noindex"><meta name="larbinscrapy" content="nofollow">',
        {"noindex", "nofollow"},
    ),
]


@pytest.mark.parametrize(("html", "expected"), ROBOTS_META)
def test_robots_meta(html: str, expected: set[str]) -> None:
    page = extract(f"<head>{html}</head>".encode(), PAGE, robots_names=("robots", "larbinscrapy"))
    assert page.robots == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("noindex", {"noindex"}),
        ("noindex, nofollow", {"noindex", "nofollow"}),
        ("none", {"noindex", "nofollow"}),
        ("googlebot: noindex", set()),
        ("larbinscrapy: nofollow", {"nofollow"}),
        ("googlebot: noindex, larbinscrapy: nofollow", {"nofollow"}),
        ("NOINDEX", {"noindex"}),
        ("", set()),
    ],
)
def test_x_robots_tag(value: str, expected: set[str]) -> None:
    assert robots_directives(value, ("robots", "larbinscrapy")) == expected


def test_rel_nofollow_links_are_apart_and_canonical_is_recorded() -> None:
    html = (
        b'<link rel="Canonical" href="/canon.html"><a href="/a" rel="nofollow">a</a>'
        b"<a href=/b rel='external NOFOLLOW'>b</a><a href=/c>c</a><a href=/a>again</a>"
        b'<link rel="stylesheet" href="/s.css"><a rel=canonical href="/not-link-tag">x</a>'
    )
    page = extract(html, PAGE)
    assert page.links == [
        "http://a.com/canon.html",
        "http://a.com/c",
        "http://a.com/a",
        "http://a.com/s.css",
        "http://a.com/not-link-tag",
    ]
    assert page.nofollow == ("http://a.com/b",)  # /a is also linked without nofollow
    assert page.canonical == "http://a.com/canon.html"
