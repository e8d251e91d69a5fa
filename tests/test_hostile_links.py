"""Total link handling: whatever a page yields as a link, the gate admits a valid Request or counts
it under a reason; one bad link never costs the page its other links (issue #14, item 1).

In-process: the real ``LinkGateMiddleware`` with a real Bloom dupefilter, and property tests
(hypothesis) of random and mutated URLs and HTML through ``links.extract`` and the gate.
"""

from __future__ import annotations

import html

import pytest
from scrapy.utils.reactor import install_reactor, is_reactor_installed

if not is_reactor_installed():
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scrapy import Request
from scrapy.http import HtmlResponse

from larbinscrapy import meta as M
from larbinscrapy.lean.request import SafeUrlRequest
from larbinscrapy.parse.links import extract
from larbinscrapy.parse.urls import canonicalize, fingerprint_url, is_valid_url
from tests.support.spider import PAGE_URL, gate, page_response
from testweb.synthweb import synthweb_pages

BAD_LINKS = [
    "http://host:99999/",  # port out of range: Request() raises ValueError
    "http://host:0/",  # port 0: nothing listens there
    "http://host:-1/",
    "http://host:abc/",
    "http://[::1/",  # unclosed IPv6 literal
    "http://[zz]/",  # not an IPv6 address
    "http:///nohost",  # empty host
    "http://:80/",
    "http://a\x00b/",  # control characters
    "http://h.test/a\x01b",
    "http://h.test/\ud800",  # a lone surrogate: not encodable
    "http://h.test/100%",  # broken percent-escapes
    "http://h.test/%zz",
    "http://a b.test/",  # no host name has a space
]
GOOD_LINKS = ["http://h.test/a.html", "http://other.test:8080/b?x=1", "https://h.test/c%20d"]


def filtered(stats, reason: str) -> int:
    return stats.get_value(f"larbin/filtered/{reason}", 0)


def test_bad_links_are_counted_and_the_page_keeps_its_good_ones():
    middleware, stats = gate()
    links = [*GOOD_LINKS[:1], *BAD_LINKS, *GOOD_LINKS[1:]]
    requests = middleware.admit(page_response(), links)
    assert [r.url for r in requests] == GOOD_LINKS
    assert filtered(stats, "invalid") == len(BAD_LINKS)


def test_a_link_that_is_not_a_string_is_counted_not_raised():
    middleware, stats = gate()
    requests = middleware.admit(page_response(), [None, 42, b"http://h.test/x", GOOD_LINKS[0]])
    assert [r.url for r in requests] == GOOD_LINKS[:1]
    assert filtered(stats, "invalid") == 3


@pytest.mark.parametrize("url", BAD_LINKS)
def test_invalid_urls(url):
    assert not is_valid_url(url)


@pytest.mark.parametrize(
    "url",
    [
        *GOOD_LINKS,
        "http://[::1]:8080/",
        "http://h.test:65535/",
        "http://caf\u00e9.test/",
        "http://h.test/caf\u00e9?q=\u00e9",
        "http://H.TEST/X",
        "http://u:p@h.test/",
        "http://a_b.test/",
    ],
)
def test_valid_urls(url):
    assert is_valid_url(url)
    Request(url)  # and a Request accepts it


# -- properties ---------------------------------------------------------------------------------
_URL_CHARS = st.sampled_from(
    [
        *"abcxyz019-._~:/?#[]@!$&'()*+,;=% <>\"\\^`{|}\t\n\r\x00\x01\x7f",
        "\u00e9",
        "\u3002",
        "\ud800",
        "\ufffd",
        "%zz",
        "%2F",
        ":99999",
        ":0",
        "[::1]",
        "//",
    ]
)
_HOST = st.from_regex(r"[a-z0-9]{1,8}(\.[a-z]{2,4}){0,2}", fullmatch=True)
_SEGMENT = st.from_regex(r"[A-Za-z0-9_~-]{1,8}", fullmatch=True)


@st.composite
def valid_urls(draw) -> str:
    """Ordinary http(s) URLs that every part of the crawl must keep."""
    scheme = draw(st.sampled_from(["http", "https"]))
    port = draw(st.one_of(st.none(), st.integers(1, 65535)))
    segments = draw(st.lists(_SEGMENT, max_size=5, unique=True))
    query = draw(st.one_of(st.none(), st.from_regex(r"[a-z]{1,5}=[a-z0-9]{0,5}", fullmatch=True)))
    url = f"{scheme}://{draw(_HOST)}{'' if port is None else f':{port}'}/" + "/".join(segments)
    return url if query is None else url + "?" + query


@st.composite
def mutated_urls(draw) -> str:
    """A valid URL with random characters inserted, replaced or cut."""
    url = draw(valid_urls())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(url)))
        op = draw(st.sampled_from(["insert", "replace", "cut"]))
        piece = draw(_URL_CHARS)
        if op == "insert":
            url = url[:at] + piece + url[at:]
        elif op == "replace":
            url = url[:at] + piece + url[at + 1 :]
        else:
            url = url[:at]
    return url


any_links = st.lists(
    st.one_of(
        mutated_urls(),
        valid_urls(),
        st.text(max_size=40),
        st.lists(_URL_CHARS, max_size=12).map(lambda t: "http://" + "".join(t)),
    ),
    max_size=30,
)
_HTML_PIECES = st.sampled_from(
    [
        "<a href=",
        "<a href='",
        '<a href="',
        '">',
        "'>",
        ">",
        "<",
        "</a>",
        "<!--",
        "-->",
        "<script>",
        "</script>",
        "<style>",
        "<base href=",
        "<meta ",
        'http-equiv="refresh" ',
        'content="0; url=',
        'name="robots" content="',
        "nofollow",
        "noindex",
        'rel="',
        "canonical",
        "<link ",
        "<frame src=",
        "<iframe src=",
        "<img src=",
        "<title>",
        "&amp;",
        "&#",
        "&#x",
        "&lt;",
        "\x00",
        "\ud800",
        "\u00e9",
        " ",
        "\n",
        "=",
        "/",
        "?",
        "#",
        "http://",
        "https://",
        "mailto:x",
        "javascript:",
        "//",
        "..",
        "./",
        ":99999",
        "[::1",
    ]
)
html_pages = st.lists(st.one_of(_HTML_PIECES, mutated_urls(), st.text(max_size=10)), max_size=60)
encodings = st.sampled_from(
    ["utf-8", "latin-1", "cp1252", "utf-16", "utf-16-le", "utf-32", "shift_jis", "x-unknown", ""]
)
HYPOTHESIS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@HYPOTHESIS
@given(any_links)
def test_the_gate_never_raises_and_accounts_for_every_link(links):
    middleware, stats = gate()
    before = dict(stats.get_stats())
    requests = middleware.admit(page_response(), links)
    after = stats.get_stats()
    counted = sum(
        v - before.get(k, 0)
        for k, v in after.items()
        if k.startswith("larbin/filtered/") or k == "larbin/dupefilter/filtered"
    )
    assert len(requests) + counted == len(links)
    for request in requests:
        assert is_valid_url(request.url)


@HYPOTHESIS
@given(st.one_of(mutated_urls(), st.text(max_size=60)))
def test_valid_means_request_and_fingerprint_accept_it(url):
    try:
        Request(url)
        accepted = True
    except ValueError:
        accepted = False
    if is_valid_url(url):
        assert accepted
        fingerprint_url(url)
        canonicalize(url)


@HYPOTHESIS
@given(
    html_pages, st.sampled_from(["utf-8", "utf-16", "latin-1", "cp1252"]), encodings, st.booleans()
)
def test_extract_never_raises_on_any_html(pieces, real, declared, images):
    # the declared charset is often a lie: bytes of one encoding, a header naming another
    body = "".join(pieces).encode(real, "surrogatepass" if real.startswith("utf") else "replace")
    page = extract(body, PAGE_URL, images=images, encoding=declared)
    for link in page.links:
        assert isinstance(link, str) and link.startswith(("http://", "https://"))
    middleware, _ = gate()
    middleware.admit(page_response(), page.links)  # and the gate takes whatever came out


@HYPOTHESIS
@given(
    st.lists(valid_urls(), min_size=1, max_size=20, unique=True),
    st.lists(mutated_urls(), max_size=20),
)
def test_valid_links_survive_among_hostile_ones(good, bad):
    # hostile values, but well-formed attributes: a quote in a value cannot eat the next tag
    body = "".join(
        f'<a href="{html.escape(u)}">x</a><a href="{html.escape(b)}">y</a>'
        for u, b in zip(good, bad + good, strict=False)
    )
    body += "".join(f'<a href="{u}">x</a>' for u in good[len(bad) :])
    page = extract(body.encode("utf-8", "surrogatepass"), PAGE_URL)
    assert {canonicalize(u) for u in good} <= {canonicalize(u) for u in page.links}
    middleware, _ = gate()
    admitted = {canonicalize(r.url) for r in middleware.admit(page_response(), page.links)}
    assert {canonicalize(u) for u in good} <= admitted


# -- the raw-link cache (issue #18): a known link skips the URL-only filters ---------------------
_CACHE_HOSTS = st.sampled_from(["h.test", "o.test", "x.test:8080"])
_CACHE_PATHS = st.sampled_from(
    [
        "a.html",
        "b.html",
        "c.pdf",
        "d?x=1",
        "e/e/e/e/e/e.html",
        "f/g/h/i/j/k/l/m/n/o/p.html",
        "q%zz",
        "r.html#top",
    ]
)
_cache_links = st.builds(
    lambda scheme, host, path: f"{scheme}://{host}/{path}",
    st.sampled_from(["http", "https", "ftp"]),
    _CACHE_HOSTS,
    _CACHE_PATHS,
)
_cache_pages = st.lists(
    st.tuples(_CACHE_HOSTS, st.integers(0, 4), st.lists(_cache_links, max_size=10)),
    min_size=1,
    max_size=15,
)


def _crawl_pages(cache: int, pages, **overrides) -> tuple[list[list[str]], dict]:
    middleware, stats = gate(LARBIN_GATE_URL_CACHE=cache, **overrides)
    admitted = []
    for host, site_depth, links in pages:
        url = f"http://{host}/page.html"
        response = HtmlResponse(
            url,
            body=b"",
            request=Request(url, meta={"depth": site_depth, M.SITE_DEPTH: site_depth}),
        )
        admitted.append([r.url for r in middleware.admit(response, links)])
    counts = {k: v for k, v in stats.get_stats().items() if k.startswith("larbin/")}
    return admitted, counts


@HYPOTHESIS
@given(_cache_pages, st.booleans())
def test_the_raw_link_cache_admits_and_counts_what_the_filters_would(pages, external):
    # cache 0 runs every filter on every link; a 3-link cache rotates within one example, and
    # links come back from pages of other hosts (external) and deeper in their site (depth)
    settings = {
        "LARBIN_EXTERNAL": external,
        "LARBIN_DEPTH": 2,
        "LARBIN_GATE_PATH_REPEATS_MAX": 2,
        "LARBIN_GATE_PATH_SEGMENTS_MAX": 8,
    }
    assert _crawl_pages(3, pages, **settings) == _crawl_pages(0, pages, **settings)


def test_a_known_link_from_another_host_is_still_external():
    link = "http://h.test/a.html"
    pages = [("h.test", 0, [link]), ("o.test", 0, [link]), ("h.test", 2, [link])]
    admitted, counts = _crawl_pages(32, pages, LARBIN_EXTERNAL=False, LARBIN_DEPTH=2)
    assert admitted == [[link], [], []]
    assert counts["larbin/filtered/external"] == 1  # not "seen": o.test may not link out
    assert counts["larbin/filtered/depth"] == 1  # depth 3 in h.test


def test_a_link_is_admitted_once_the_seen_set_found_through_the_scheduler():
    # the gate finds the crawl's seen-set through the scheduler (frontier.seen_set_of): without
    # it every link would become a Request, the cache tests above would compare nothing
    link = "http://h.test/a.html"
    for cache in (0, 32):
        admitted, counts = _crawl_pages(cache, [("h.test", 0, [link]), ("h.test", 0, [link])])
        assert admitted == [[link], []]
        assert counts["larbin/dupefilter/filtered"] == 1


# -- SafeUrlRequest (issue #18): the URL Request() would give, without w3lib's parse --------
PORTS = [
    "http://h.test:65535/",
    "http://h.test:65536/",
    "http://h.test:080/",
    "http://h.test:1/",
    "http://h.test:" + "9" * 5000 + "/",
    "https://h.test:443/x?a=1&b=%41",
]


def _made(cls: type, url: object) -> tuple:
    try:
        request = cls(url)
    except Exception as exc:  # the outcome is compared, whatever it is
        return ("raised", type(exc).__name__, str(exc))
    return ("url", request.url)


@pytest.mark.parametrize("url", [*BAD_LINKS, *GOOD_LINKS, *PORTS, 42, b"http://h.test/"])
def test_a_safe_url_request_gives_what_request_gives(url: object) -> None:
    assert _made(SafeUrlRequest, url) == _made(Request, url)


@HYPOTHESIS
@given(st.one_of(valid_urls(), mutated_urls()))
def test_safe_url_requests_of_any_url_agree_with_request(url: str) -> None:
    assert _made(SafeUrlRequest, url) == _made(Request, url)


def test_the_benchmark_webs_links_make_the_same_requests() -> None:
    links = {u for url, body in synthweb_pages(1000) for u in extract(body, url).links}
    assert len(links) > 500
    for url in links:
        assert SafeUrlRequest(url).url == Request(url).url == url
