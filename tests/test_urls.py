"""Tables of cases for parse.urls: canonical form, site/host/extension, fingerprints."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from larbinscrapy.parse.urls import (
    CanonicalUrlFingerprinter,
    canonicalize,
    extension_of,
    fingerprint_url,
    host_of,
    site_of,
)

CANONICAL = [
    # already canonical: the fast path returns the string itself
    ("http://a.com/", "http://a.com/"),
    ("http://a.com/x/y.html", "http://a.com/x/y.html"),
    ("https://a.com/x?q=1", "https://a.com/x?q=1"),
    ("http://a.com:8080/x", "http://a.com:8080/x"),
    ("http://127.0.1.1:8080/p", "http://127.0.1.1:8080/p"),
    # scheme and host case, default ports, empty port
    ("HTTP://A.COM/X", "http://a.com/X"),
    ("http://A.com:80/x#f", "http://a.com/x"),
    ("https://a.com:443/", "https://a.com/"),
    ("http://a.com:443/", "http://a.com:443/"),
    ("https://a.com:80/", "https://a.com:80/"),
    ("http://a.com:/x", "http://a.com/x"),
    ("http://a.com:080/x", "http://a.com/x"),
    # empty path, fragment, empty query
    ("http://a.com", "http://a.com/"),
    ("http://a.com#top", "http://a.com/"),
    ("http://a.com/x#", "http://a.com/x"),
    ("http://a.com/x?", "http://a.com/x"),
    ("http://a.com/x?#f", "http://a.com/x"),
    ("http://a.com?q=1", "http://a.com/?q=1"),
    # query sorting: by key then value, stable, blank values kept
    ("http://a.com/x?b=1&a=2", "http://a.com/x?a=2&b=1"),
    ("http://a.com/x?a=2&a=1", "http://a.com/x?a=1&a=2"),
    ("http://a.com/x?b&a=", "http://a.com/x?a=&b"),
    ("http://a.com/x?a-b=1&a=2", "http://a.com/x?a=2&a-b=1"),
    ("http://a.com/x?b=1&&a=2&", "http://a.com/x?a=2&b=1"),
    ("http://a.com/x?&", "http://a.com/x"),
    ("http://a.com/x?q=a/b?c", "http://a.com/x?q=a/b?c"),
    # percent-escapes are kept, never decoded
    ("http://a.com/a%2Fb", "http://a.com/a%2Fb"),
    ("http://a.com/a%2fb?x=%26", "http://a.com/a%2fb?x=%26"),
    # what Request() would percent-encode is encoded the same way
    ("http://a.com/a b", "http://a.com/a%20b"),
    ("http://a.com/caf\u00e9?q=\u00e9", "http://a.com/caf%C3%A9?q=%C3%A9"),
    ("http://a.com/x?q='", "http://a.com/x?q=%27"),
    (" http://a.com/x\n", "http://a.com/x"),
    # userinfo and IPv6
    ("http://User:Pw@A.com:80/", "http://User:Pw@a.com/"),
    ("http://[::1]:80/a?z&y=", "http://[::1]/a?y=&z"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
    # other schemes and relative references are left mostly alone
    ("mailto:Someone@Example.com", "mailto:Someone@Example.com"),
    ("FTP://A.com:21/x", "ftp://a.com/x"),
    ("/relative/path#f", "/relative/path"),
]


@pytest.mark.parametrize(("url", "expected"), CANONICAL)
def test_canonicalize(url: str, expected: str) -> None:
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected  # idempotent


EQUIVALENT = [
    ("http://a.com/x?b=1&a=2", "http://a.com/x?a=2&b=1"),
    ("http://A.com:80/x#f", "http://a.com/x"),
    ("https://a.com:443", "https://a.com/"),
    ("http://a.com/x?", "http://a.com/x"),
    ("http://a.com/a b", "http://a.com/a%20b"),
]
DIFFERENT = [
    ("http://a.com/a%2Fb", "http://a.com/a/b"),
    ("http://a.com/x", "https://a.com/x"),
    ("http://a.com/x", "http://a.com/X"),
    ("http://a.com:8080/", "http://a.com/"),
    ("http://a.com/x?a=1", "http://a.com/x?a=2"),
    ("http://a.com/x/", "http://a.com/x"),
]


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_urls_share_a_key(a: str, b: str) -> None:
    assert canonicalize(a) == canonicalize(b)
    assert fingerprint_url(a) == fingerprint_url(b)


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_urls_have_different_keys(a: str, b: str) -> None:
    assert canonicalize(a) != canonicalize(b)
    assert fingerprint_url(a) != fingerprint_url(b)


SITES = [
    ("http://a.com/x", "http://a.com:80"),
    ("http://a.com", "http://a.com:80"),
    ("https://a.com/x", "https://a.com:443"),
    ("http://A.Com:8080?x", "http://a.com:8080"),
    ("HTTP://a.com:80/", "http://a.com:80"),
    ("http://a.com:080/", "http://a.com:80"),
    ("http://u:p@a.com/", "http://a.com:80"),
    ("http://127.0.1.1:8080/p", "http://127.0.1.1:8080"),
    ("http://[::1]/", "http://[::1]:80"),
    ("ftp://a.com/f", "ftp://a.com:21"),
    ("/relative", ""),
]


@pytest.mark.parametrize(("url", "expected"), SITES)
def test_site_of(url: str, expected: str) -> None:
    assert site_of(url) == expected


HOSTS = [
    ("http://a.com/x", "a.com"),
    ("http://A.COM:8080/x", "a.com"),
    ("https://www.Example.com", "www.example.com"),
    ("http://u:p@h01.test:80/", "h01.test"),
    ("http://127.0.1.1:8080/", "127.0.1.1"),
    ("http://[::1]:8080/", "::1"),
    ("http://a.com?q=http://b.com/", "a.com"),
    ("mailto:x@y", ""),
    ("relative/x", ""),
]


@pytest.mark.parametrize(("url", "expected"), HOSTS)
def test_host_of(url: str, expected: str) -> None:
    assert host_of(url) == expected


EXTENSIONS = [
    ("http://a.com/a/b.PDF?x=1", ".pdf"),
    ("http://a.com/a.b/c", ""),
    ("http://a.com/a/b.tar.gz", ".gz"),
    ("http://a.com/x.html#a.b", ".html"),
    ("http://a.com/x?f=y.pdf", ""),
    ("http://a.com", ""),
    ("http://a.com/", ""),
    ("http://www.a.com/dir/", ""),
    ("http://a.com/file.", ""),
    ("http://a.com/a.pdf;jsessionid=1.2", ".pdf"),
    ("/local/img.JPG", ".jpg"),
    ("img.png", ".png"),
]


@pytest.mark.parametrize(("url", "expected"), EXTENSIONS)
def test_extension_of(url: str, expected: str) -> None:
    assert extension_of(url) == expected


FINGERPRINT_URLS = [url for url, _ in CANONICAL if "://" in url] + [
    "http://h01.test:8080/dir/page-3.html",
    "https://www.example.com/search?q=larbin&page=2",
    "http://a.com/%7Euser/",
    "http://a.com/x?b=\u00fc&a=1#frag",
]


@pytest.mark.parametrize("url", FINGERPRINT_URLS)
def test_fingerprint_url_equals_request_fingerprint(url: str) -> None:
    fingerprinter = CanonicalUrlFingerprinter()
    fp = fingerprinter.fingerprint(Request(url))
    assert fingerprint_url(url) == fp
    assert fingerprinter.fingerprint_url(url) == fp
    assert len(fp) == 16


def test_method_and_body_change_the_fingerprint() -> None:
    fingerprinter = CanonicalUrlFingerprinter()
    url = "http://a.com/form"
    get = fingerprinter.fingerprint(Request(url))
    post = fingerprinter.fingerprint(Request(url, method="POST"))
    post_body = fingerprinter.fingerprint(Request(url, method="POST", body=b"a=1"))
    post_other = fingerprinter.fingerprint(Request(url, method="POST", body=b"a=2"))
    assert len({get, post, post_body, post_other}) == 4
    assert fingerprinter.fingerprint(Request(url, method="POST", body=b"")) == post


def test_headers_do_not_change_the_fingerprint() -> None:
    fingerprinter = CanonicalUrlFingerprinter()
    url = "http://a.com/"
    plain = fingerprinter.fingerprint(Request(url))
    assert fingerprinter.fingerprint(Request(url, headers={"Accept": "text/html"})) == plain


def test_fingerprint_is_cached_per_request() -> None:
    fingerprinter = CanonicalUrlFingerprinter()
    request = Request("http://a.com/x")
    first = fingerprinter.fingerprint(request)
    assert fingerprinter.fingerprint(request) is first
    assert len(fingerprinter._cache) == 1
    del request
    assert len(fingerprinter._cache) == 0  # weak keys: no leak once the request is gone


def test_fingerprint_is_stable_across_processes() -> None:
    # A constant: a JOBDIR written by one process must be read by the next one.
    assert fingerprint_url("http://a.com/").hex() == "11c64df5714e1c9ae43698e266129bf2"


def test_from_crawler() -> None:
    crawler = get_crawler(
        settings_dict={
            "REQUEST_FINGERPRINTER_CLASS": "larbinscrapy.parse.urls.CanonicalUrlFingerprinter"
        }
    )
    fingerprinter = CanonicalUrlFingerprinter.from_crawler(crawler)
    assert fingerprinter.fingerprint(Request("http://a.com/")) == fingerprint_url("http://a.com")


# -- session ids (issue #14, item 7: Heritrix's StripSessionIDs) -------------------------------
SESSION = [
    ("http://a.com/x?jsessionid=ABC123", "http://a.com/x"),
    ("http://a.com/x?PHPSESSID=abc&page=2", "http://a.com/x?page=2"),
    ("http://a.com/x?page=2&sessionid=zz", "http://a.com/x?page=2"),
    ("http://a.com/x?b=1&session_id=9&a=2", "http://a.com/x?a=2&b=1"),
    ("http://a.com/x?ASPSESSIONIDQQGGQGPG=KJHGFD", "http://a.com/x"),
    ("http://a.com/x?CFID=123&CFTOKEN=456&y=1", "http://a.com/x?y=1"),
    ("http://a.com/x?sid=0123456789abcdef0123", "http://a.com/x"),
    ("http://a.com/x;jsessionid=A1B2C3?q=1", "http://a.com/x?q=1"),
    ("http://a.com/d;jsessionid=A1/p.html", "http://a.com/d/p.html"),
    ("http://a.com/x;type=a;jsessionid=Z", "http://a.com/x;type=a"),
    # kept: a short sid is as often a site or section id; look-alike names are other arguments
    ("http://a.com/x?sid=12", "http://a.com/x?sid=12"),
    ("http://a.com/x?mysessions=3", "http://a.com/x?mysessions=3"),
    ("http://a.com/x;v=1", "http://a.com/x;v=1"),
]


@pytest.mark.parametrize(("url", "expected"), SESSION)
def test_session_ids_are_removed(url: str, expected: str) -> None:
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected
    assert fingerprint_url(url) == fingerprint_url(expected)
