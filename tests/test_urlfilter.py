"""``UrlFilter``: larbin's check()/filter1() as tables, one reason at a time (pure, no Scrapy)."""

from __future__ import annotations

import pytest

from larbinscrapy.gate.urlfilter import (
    CGI,
    DEPTH,
    DOMAIN,
    EXTENSION,
    EXTERNAL,
    INVALID,
    LENGTH,
    PATH_REPEAT,
    PATH_SEGMENTS,
    SCHEME,
    UrlFilter,
    parse_domains,
    parse_extensions,
)
from settings.base import LARBIN_GATE_FORBIDDEN_EXTENSIONS, URLLENGTH_LIMIT

LARBIN_EXTENSIONS = parse_extensions(LARBIN_GATE_FORBIDDEN_EXTENSIONS)
DEFAULT = UrlFilter(forbidden_extensions=LARBIN_EXTENSIONS)


def reason(flt: UrlFilter, url: str, site_depth: int = 0, source: str | None = None) -> str | None:
    return flt.check(url, site_depth, source)


# -- scheme -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.com/", None),
        ("https://a.com/", None),
        ("ftp://a.com/file", SCHEME),
        ("mailto:someone@a.com", SCHEME),
        ("javascript:void(0)", SCHEME),
        ("data:text/html,hi", SCHEME),
        ("file:///etc/passwd", SCHEME),
        ("gopher://a.com/", SCHEME),
        ("//a.com/", SCHEME),  # not resolved: the link extractor makes URLs absolute first
        ("/relative.html", SCHEME),
    ],
)
def test_scheme(url, expected):
    assert reason(DEFAULT, url) == expected


# -- length ------------------------------------------------------------------------------------
def _url_of_length(n: int) -> str:
    head = "http://a.com/"
    return head + "x" * (n - len(head))


@pytest.mark.parametrize(
    ("length", "expected"),
    [(100, None), (511, None), (512, None), (513, LENGTH), (5000, LENGTH)],
)
def test_length_limit_is_512_by_default(length, expected):
    url = _url_of_length(length)
    assert len(url) == length
    assert URLLENGTH_LIMIT == 512
    assert reason(DEFAULT, url) == expected


def test_length_limit_is_configurable():
    short = UrlFilter(max_length=30)
    assert reason(short, _url_of_length(30)) is None
    assert reason(short, _url_of_length(31)) == LENGTH


# -- forbidden extensions ------------------------------------------------------------------------
# larbin.conf's forbiddenExtensions list, as shipped.
LARBIN_CONF_LIST = [
    ".tar",
    ".gz",
    ".tgz",
    ".zip",
    ".Z",
    ".rpm",
    ".deb",
    ".ps",
    ".dvi",
    ".pdf",
    ".png",
    ".jpg",
    ".jpeg",
    ".bmp",
    ".smi",
    ".tiff",
    ".gif",
    ".mov",
    ".avi",
    ".mpeg",
    ".mpg",
    ".mp3",
    ".qt",
    ".wav",
    ".ram",
    ".rm",
    ".jar",
    ".java",
    ".class",
    ".diff",
    ".doc",
    ".xls",
    ".ppt",
    ".mdb",
    ".rtf",
    ".exe",
    ".pps",
    ".so",
    ".psd",
]


def test_default_list_is_larbins():
    assert {e.lower() for e in LARBIN_CONF_LIST} == LARBIN_EXTENSIONS


@pytest.mark.parametrize("ext", LARBIN_CONF_LIST)
@pytest.mark.parametrize("case", [str.lower, str.upper, str.capitalize])
def test_every_forbidden_extension_case_insensitively(ext, case):
    name = case("file" + ext)
    assert reason(DEFAULT, f"http://a.com/dir/{name}") == EXTENSION
    assert reason(DEFAULT, f"http://a.com/dir/{name}?v=2") == EXTENSION
    assert reason(DEFAULT, f"http://a.com/dir/{name}#part") == EXTENSION


@pytest.mark.parametrize(
    "url",
    [
        "http://a.com/",
        "http://a.com/page.html",
        "http://a.com/page.htm",
        "http://a.com/script.php?f=report.pdf",  # the query is not the file
        "http://a.com/report.pdf/",  # a directory
        "http://a.com/report.pdf.html",  # only the last extension counts
        "http://a.com/pdf",
        "http://a.com/file.pdfx",
        "http://a.com/file.",
        "http://files.zip/",  # dots in the host are not an extension
        "http://a.com/dir.zip/page.html",  # nor dots in a directory
        "http://a.com/notes.txt",
        "http://a.com/image.webp",  # not in larbin's list
    ],
)
def test_allowed_extensions(url):
    assert reason(DEFAULT, url) is None


def test_tar_gz_is_forbidden_by_its_last_extension():
    assert reason(DEFAULT, "http://a.com/src.tar.gz") == EXTENSION


def test_path_parameters_do_not_hide_the_extension():
    assert reason(DEFAULT, "http://a.com/a.pdf;jsessionid=1") == EXTENSION


def test_no_list_forbids_nothing():
    assert reason(UrlFilter(), "http://a.com/a.pdf") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (".pdf .ZIP", {".pdf", ".zip"}),
        ("pdf, zip", {".pdf", ".zip"}),
        ([".PDF", "zip"], {".pdf", ".zip"}),
        ("", set()),
        (" . ", set()),
    ],
)
def test_parse_extensions(value, expected):
    assert parse_extensions(value) == expected


# -- CGI levels ----------------------------------------------------------------------------------
CGI_TABLE = [
    # url,                                  level 0, level 1, level 2
    ("http://a.com/page.html", None, None, None),
    ("http://a.com/search?q=x", None, CGI, CGI),
    ("http://a.com/list?page", None, CGI, CGI),
    ("http://a.com/a=b", None, CGI, CGI),
    ("http://a.com/cgi-bin/run", None, None, CGI),
    ("http://a.com/CGI-BIN/run", None, None, CGI),
    ("http://a.com/run.cgi", None, None, CGI),
    ("http://a.com/cgi-bin/run?x=1", None, CGI, CGI),
]


@pytest.mark.parametrize(("url", "level0", "level1", "level2"), CGI_TABLE)
def test_cgi_levels(url, level0, level1, level2):
    for level, expected in ((0, level0), (1, level1), (2, level2)):
        assert reason(UrlFilter(cgi_level=level), url) == expected, (url, level)


@pytest.mark.parametrize("level", [-1, 3, "1"])
def test_bad_cgi_level_is_rejected(level):
    with pytest.raises(ValueError, match="LARBIN_GATE_CGI_LEVEL"):
        UrlFilter(cgi_level=level)


# -- domains (larbin limitToDomain) ------------------------------------------------------------
DOMAIN_TABLE = [
    # host,                     domains,                       expected
    ("example.com", ("example.com",), None),
    ("www.example.com", ("example.com",), None),
    ("a.b.example.com", ("example.com",), None),
    ("evil-example.com", ("example.com",), DOMAIN),
    ("example.com.evil.net", ("example.com",), DOMAIN),
    ("notexample.com", ("example.com",), DOMAIN),
    ("example.org", ("example.com",), DOMAIN),
    ("example.org", ("example.com", "org"), None),
    ("www.example.org", ("org",), None),
    ("h01.test", ("test",), None),
    ("h01.test", ("h01.test",), None),
    ("alias01.test", ("h01.test",), DOMAIN),
    ("anything.net", (), None),  # no list: every domain
]


@pytest.mark.parametrize(("host", "domains", "expected"), DOMAIN_TABLE)
def test_domain_suffix_matching(host, domains, expected):
    assert reason(UrlFilter(domains=domains), f"http://{host}:8080/page.html") == expected


def test_domain_matching_ignores_host_case():
    flt = UrlFilter(domains=parse_domains("Example.COM"))
    assert reason(flt, "http://WWW.EXAMPLE.COM/") is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("example.com", ("example.com",)),
        ("example.com, .org", ("example.com", "org")),
        (" A.Test ,, b.test. ", ("a.test", "b.test")),
        (["x.com", ".y.org"], ("x.com", "y.org")),
        ("", ()),
        (",", ()),
    ],
)
def test_parse_domains(value, expected):
    assert parse_domains(value) == expected


# -- external links (larbin noExternalLinks) -------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "source", "external", "expected"),
    [
        ("http://a.com/x", "a.com", False, None),
        ("http://b.com/x", "a.com", False, EXTERNAL),
        ("http://www.a.com/x", "a.com", False, EXTERNAL),  # another host, even a subdomain
        ("http://b.com/x", "a.com", True, None),
        ("http://b.com/x", None, False, None),  # a seed is never external
    ],
)
def test_external(url, source, external, expected):
    assert reason(UrlFilter(external=external), url, 0, source) == expected


# -- depth in site (larbin depthInSite) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("max_depth", "site_depth", "expected"),
    [
        (None, 0, None),
        (None, 1000, None),  # no limit
        (0, 0, None),  # depth 0: seeds and links to other sites (they restart at 0)
        (0, 1, DEPTH),
        (5, 5, None),
        (5, 6, DEPTH),
    ],
)
def test_depth_in_site(max_depth, site_depth, expected):
    flt = UrlFilter(max_depth=max_depth)
    assert reason(flt, "http://a.com/x", site_depth, "a.com") == expected


# -- order: the cheapest test decides, so stats count each URL once ----------------------
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ftp://b.com/" + "x" * 600 + ".pdf", SCHEME),
        ("http://b.com/" + "x" * 600 + ".pdf?q=1", LENGTH),
        ("http://b.com/x.pdf?q=1", EXTENSION),
        ("http://b.com/x?q=1", CGI),
        ("http://b.com/x", DOMAIN),
        ("http://c.a.com/x", EXTERNAL),
        ("http://a.com/x", DEPTH),
    ],
)
def test_one_reason_per_url_in_larbins_order(url, expected):
    flt = UrlFilter(
        forbidden_extensions=LARBIN_EXTENSIONS,
        domains=("a.com",),
        external=False,
        max_depth=2,
        cgi_level=1,
    )
    assert reason(flt, url, 3, "a.com") == expected


# -- invalid URLs and path traps (issue #14, items 1 and 7) -------------------------------------
TRAPS = UrlFilter(max_path_segments=7, max_path_repeats=2)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://a.com:99999/", INVALID),
        ("http://[::1/", INVALID),
        ("http:///x", INVALID),
        ("http://a.com/%zz", INVALID),
        ("http://a.com/1/2/3/4/5/6/7", None),
        ("http://a.com/1/2/3/4/5/6/7/8", PATH_SEGMENTS),
        ("http://a.com/1/2/3/4/5/6/7?q=/8/9", None),  # the query is not the path
        ("http://a.com/a/a/", None),
        ("http://a.com/a/a/a", PATH_REPEAT),
        ("http://a.com/a/b/a/b/", None),
        ("http://a.com/a/b/a/b/a/b", PATH_REPEAT),
        ("http://a.com/x/a/b/a/b/a/b", PATH_REPEAT),  # the run need not start the path
        ("http://a.com/x/y/a/b/c/a/b/c/a/b/c", None),  # 11 segments: segments limit off below
        ("http://a.com/a/b/c/a/b/c", None),
    ],
)
def test_invalid_and_path_traps(url, expected):
    flt = TRAPS if "x/y" not in url else UrlFilter(max_path_repeats=3)
    assert reason(flt, url) == expected


def test_long_repetitions_are_caught_with_the_segment_limit_off():
    flt = UrlFilter(max_path_repeats=2)
    assert reason(flt, "http://a.com/x/y/a/b/c/a/b/c/a/b/c") == PATH_REPEAT
    assert reason(flt, "http://a.com/" + "/".join(f"s{i}" for i in range(100))) is None
    assert reason(UrlFilter(), "http://a.com/a/a/a/a") is None  # both off: larbin's filter only


def test_trap_guard_caps_queries_per_path_and_pages_per_site():
    from larbinscrapy.gate.traps import QUERIES, SITE_BUDGET, TrapGuard

    guard = TrapGuard(max_pages_per_site=5, max_queries_per_path=3)
    cal = [f"http://a.com/cal?month={m}" for m in range(5)]
    assert [guard.reason(u) for u in cal] == [None, None, None, QUERIES, QUERIES]
    assert guard.reason("http://a.com/other?month=1") is None  # another path has its own cap
    assert guard.reason("http://a.com/p1") is None
    assert guard.reason("http://a.com/p2") == SITE_BUDGET  # 3 + 1 + 1 queued: budget spent
    assert guard.reason("http://a.com:8080/p") is None  # another port is another site
    assert TrapGuard(0, 0).enabled is False
    with pytest.raises(ValueError, match="LARBIN_GATE_PAGES_PER_SITE_MAX"):
        TrapGuard(-1, 0)


def test_the_page_budget_of_every_site_costs_no_copy_of_its_name():
    """A broad crawl counts pages for every site it meets, to its end: the count of 20,000 sites
    holds a number a site, not a copy of the site's name (a hash, as the query cap's paths), in
    a slot of a flat table, not a dict entry and two ints (~65 bytes)."""
    import gc
    import tracemalloc

    from larbinscrapy.gate.traps import TrapGuard

    guard = TrapGuard(max_pages_per_site=100, max_queries_per_path=0)
    urls = [f"http://host{n}.example.test/" for n in range(20_000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert all(guard.reason(url) is None for url in urls)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # a 16-byte slot at a load of 1/3 to 2/3
    assert held / len(urls) < 40, f"{held / len(urls):.0f} bytes a site"
