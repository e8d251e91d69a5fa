"""robots.txt cases written from what Google's robotstxt tests check (``robots_test.cc``,
github.com/google/robotstxt), run by ``make conformance`` (``conformance/run.py``; alone:
``.venv/bin/pytest conformance/test_robotstxt_cases.py``). Each case is ours: (robots.txt,
product token, URL, allowed).

The differences we keep are listed in docs/politeness.md; none is in this table.
"""

from __future__ import annotations

import pytest

from larbinscrapy.politeness.robotstxt import (
    RobotsTxtParser,
    compile_rules,
    escape_pattern,
    path_of,
    product_token,
)

FOO_ALL = "user-agent: BotA\ndisallow: /\n"
GROUPS = (
    "allow: /lonely/\n\nuser-agent: BotA\ndisallow: /\nallow: /ka/\n"
    "user-agent: BotB\ndisallow: /\nallow: /kb/\n\n\nallow: /kw/\n"
    "user-agent: BotC\n\nuser-agent: BotA\nallow: /kz/\ndisallow: /\n"
)
UPPER = "USER-AGENT: BotA\nALLOW: /ok/\nDISALLOW: /\n"
MIXED = "uSeR-aGeNt: BotA\naLlOw: /ok/\nDiSaLlOw: /\n"
VALUE_CASE = "User-Agent: BOTA extra\nAllow: /ok/\nDisallow: /\n"
SPACE_AGENT = "User-Agent: *\nDisallow: /\nUser-Agent: BotA Extra\nAllow: /ok/\nDisallow: /\n"
GLOBAL = "user-agent: *\nallow: /\nuser-agent: BotA\ndisallow: /\n"
ONLY_SPECIFIC = "user-agent: BotA\nallow: /\nuser-agent: BotB\ndisallow: /\n"
LONG = "x" * (2083 * 8)


def _rules(*lines: str) -> str:
    return "user-agent: BotA\n" + "".join(line + "\n" for line in lines)


CASES = [
    # an empty file, an empty agent, an empty URL (its path is "/")
    ("", "BotA", "", True),
    (FOO_ALL, "", "", True),
    (FOO_ALL, "BotA", "", False),
    ("", "", "", True),
    # lines: "name: value"; a missing colon is read; unknown names are ignored
    (FOO_ALL, "BotA", "http://h.test/a/b", False),
    ("foo: BotA\nbar: /\n", "BotA", "http://h.test/a/b", True),
    ("user-agent BotA\ndisallow /\n", "BotA", "http://h.test/a/b", False),
    # groups: rules outside one are ignored, one agent's groups merge
    (GROUPS, "BotA", "http://h.test/ka/1", True),
    (GROUPS, "BotA", "http://h.test/kz/1", True),
    (GROUPS, "BotA", "http://h.test/kb/1", False),
    (GROUPS, "BotB", "http://h.test/kb/1", True),
    (GROUPS, "BotB", "http://h.test/kw/1", True),
    (GROUPS, "BotB", "http://h.test/kz/1", False),
    (GROUPS, "BotC", "http://h.test/kz/1", True),
    (GROUPS, "BotA", "http://h.test/lonely/", False),
    (GROUPS, "BotB", "http://h.test/lonely/", False),
    (GROUPS, "BotC", "http://h.test/lonely/", False),
    # a Sitemap or an unknown line between two User-agent lines does not end the group
    (
        "User-agent: BotB\nSitemap: https://h.test/s.xml\nUser-agent: *\nDisallow: /\n",
        "BotA",
        "http://h.test/",
        False,
    ),
    (
        "User-agent: BotB\nSitemap: https://h.test/s.xml\nUser-agent: *\nDisallow: /\n",
        "BotB",
        "http://h.test/",
        False,
    ),
    (
        "User-agent: BotA\nSome-Other-Line: x\nUser-agent: *\nDisallow: /\n",
        "BotA",
        "http://h.test/",
        False,
    ),
    (
        "User-agent: BotA\nSome-Other-Line: x\nUser-agent: *\nDisallow: /\n",
        "BotB",
        "http://h.test/",
        False,
    ),
    # names of lines and agent values are case-insensitive; paths are not
    *[(text, "BotA", "http://h.test/ok/1", True) for text in (UPPER, MIXED, UPPER.lower())],
    *[(text, "BotA", "http://h.test/no/1", False) for text in (UPPER, MIXED, UPPER.lower())],
    *[
        (VALUE_CASE, agent, url, ok)
        for agent in ("BotA", "bota", "BOTA")
        for url, ok in (("http://h.test/ok/1", True), ("http://h.test/no/1", False))
    ],
    # an agent value is read up to its first character outside a token
    (SPACE_AGENT, "BotA", "http://h.test/ok/1", True),
    (SPACE_AGENT, "BotA Extra", "http://h.test/ok/1", False),
    # no group of ours: the * group; no * group: nothing applies
    ("", "BotA", "http://h.test/a", True),
    (GLOBAL, "BotA", "http://h.test/a", False),
    (GLOBAL, "BotB", "http://h.test/a", True),
    (ONLY_SPECIFIC, "BotC", "http://h.test/a", True),
    (_rules("disallow: /k/"), "BotA", "http://h.test/k/1", False),
    (_rules("disallow: /K/"), "BotA", "http://h.test/k/1", True),
    # the longest match wins; at equal length, Allow
    (_rules("disallow: /k/p.html", "allow: /k/"), "BotA", "http://h.test/k/p.html", False),
    (_rules("allow: /k/p.html", "disallow: /k/"), "BotA", "http://h.test/k/p.html", True),
    (_rules("allow: /k/p.html", "disallow: /k/"), "BotA", "http://h.test/k/", False),
    (_rules("disallow: ", "allow: "), "BotA", "http://h.test/k/p.html", True),
    (_rules("disallow: /", "allow: /"), "BotA", "http://h.test/k/p.html", True),
    (_rules("disallow: /k", "allow: /k/"), "BotA", "http://h.test/k", False),
    (_rules("disallow: /k", "allow: /k/"), "BotA", "http://h.test/k/", True),
    (_rules("disallow: /k/p.html", "allow: /k/p.html"), "BotA", "http://h.test/k/p.html", True),
    (_rules("allow: /page", "disallow: /*.html"), "BotA", "http://h.test/page.html", False),
    (_rules("allow: /page", "disallow: /*.html"), "BotA", "http://h.test/page", True),
    (_rules("allow: /k/page.", "disallow: /*.html"), "BotA", "http://h.test/k/page.html", True),
    (_rules("allow: /k/page.", "disallow: /*.html"), "BotA", "http://h.test/k/q.html", False),
    (
        "User-agent: *\nDisallow: /k/\nUser-agent: BotA\nDisallow: /j/\n",
        "BotA",
        "http://h.test/k/p",
        True,
    ),
    (
        "User-agent: *\nDisallow: /k/\nUser-agent: BotA\nDisallow: /j/\n",
        "BotA",
        "http://h.test/j/p",
        False,
    ),
    # percent-encoding: the rule is encoded, the URL is taken as it comes
    (
        _rules("disallow: /", "allow: /a/b?q=t&u=http://h.test?v&w"),
        "BotA",
        "http://h.test/a/b?q=t&u=http://h.test?v&w",
        True,
    ),
    (_rules("disallow: /", "allow: /a/b/ツ"), "BotA", "http://h.test/a/b/%E3%83%84", True),
    (_rules("disallow: /", "allow: /a/b/ツ"), "BotA", "http://h.test/a/b/ツ", False),
    (_rules("disallow: /", "allow: /a/b/%E3%83%84"), "BotA", "http://h.test/a/b/%E3%83%84", True),
    (_rules("disallow: /", "allow: /a/b/%E3%83%84"), "BotA", "http://h.test/a/b/ツ", False),
    (_rules("disallow: /", "allow: /a/b/%62%61%7A"), "BotA", "http://h.test/a/b/baz", False),
    (_rules("disallow: /", "allow: /a/b/%62%61%7A"), "BotA", "http://h.test/a/b/%62%61%7A", True),
    # special characters: * any run, $ the end, # a comment
    *[
        (_rules("disallow: /a/b/c", "allow: /a/*/d"), "BotA", "http://h.test" + p, ok)
        for p, ok in (("/a/b/c", False), ("/a/c", True), ("/a//c", True), ("/a/x/c", True))
    ],
    *[
        (_rules("disallow: /a/b$", "allow: /a/b/c"), "BotA", "http://h.test" + p, ok)
        for p, ok in (("/a/b", False), ("/a/b/c", True), ("/a/b/", True), ("/a/b/x", True))
    ],
    (_rules("# disallow: /", "disallow: /a/q#c", "allow: /"), "BotA", "http://h.test/a/b", True),
    (_rules("# disallow: /", "disallow: /a/q#c", "allow: /"), "BotA", "http://h.test/a/q", False),
    # index.html allowed: its directory too (Google's reading, kept)
    *[
        ("User-Agent: *\nAllow: /ok/index.html\nDisallow: /\n", "BotA", "http://h.test" + p, ok)
        for p, ok in (
            ("/ok/", True),
            ("/ok/index.htm", False),
            ("/ok/index.html", True),
            ("/other", False),
        )
    ],
    # a line is read up to 16,663 bytes, the rest cut off
    (_rules("disallow: /k/" + LONG[: 16652 - 3] + "/qux"), "BotA", "http://h.test/fux", True),
    (
        _rules("disallow: /k/" + LONG[: 16652 - 3] + "/qux"),
        "BotA",
        "http://h.test/k/" + LONG[: 16652 - 3] + "/fux",
        False,
    ),
    *[
        (
            _rules(
                "disallow: /",
                "allow: /k/" + "a" * 16652 + "/qux",
                "allow: /k/" + "b" * 16652 + "/qux",
            ),
            "BotA",
            "http://h.test" + p,
            ok,
        )
        for p, ok in (
            ("/", False),
            ("/k/" + "a" * 16652 + "/qux", True),
            ("/k/" + "b" * 16652 + "/fux", True),
        )
    ],
]

FISH = [  # (allow pattern, [(path, allowed)]) under "disallow: /"
    (
        "/fish",
        [
            ("/bar", False),
            ("/fish", True),
            ("/fish.html", True),
            ("/fish/salmon.html", True),
            ("/fishheads", True),
            ("/fishheads/yummy.html", True),
            ("/fish.html?id=anything", True),
            ("/Fish.asp", False),
            ("/catfish", False),
            ("/?id=fish", False),
        ],
    ),
    (
        "/fish*",
        [
            ("/bar", False),
            ("/fish", True),
            ("/fish.html", True),
            ("/fish/salmon.html", True),
            ("/fishheads", True),
            ("/fishheads/yummy.html", True),
            ("/fish.html?id=anything", True),
            ("/Fish.bar", False),
            ("/catfish", False),
            ("/?id=fish", False),
        ],
    ),
    (
        "/fish/",
        [
            ("/bar", False),
            ("/fish/", True),
            ("/fish/salmon", True),
            ("/fish/?salmon", True),
            ("/fish/salmon.html", True),
            ("/fish/?id=anything", True),
            ("/fish", False),
            ("/fish.html", False),
            ("/Fish/Salmon.html", False),
        ],
    ),
    (
        "/*.php",
        [
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/folder/filename.php?parameters", True),
            ("//folder/any.php.file.html", True),
            ("/filename.php/", True),
            ("/index?f=filename.php/", True),
            ("/php/", False),
            ("/index?php", False),
            ("/windows.PHP", False),
        ],
    ),
    (
        "/*.php$",
        [
            ("/bar", False),
            ("/filename.php", True),
            ("/folder/filename.php", True),
            ("/filename.php?parameters", False),
            ("/filename.php/", False),
            ("/filename.php5", False),
            ("/php/", False),
            ("/filename?php", False),
            ("/aaaphpaaa", False),
            ("//windows.PHP", False),
        ],
    ),
    (
        "/fish*.php",
        [
            ("/bar", False),
            ("/fish.php", True),
            ("/fishheads/catfish.php?parameters", True),
            ("/Fish.PHP", False),
        ],
    ),
]
CASES += [
    (_rules("disallow: /", "allow: " + pattern), "BotA", "http://h.test" + path, ok)
    for pattern, paths in FISH
    for path, ok in paths
]
CASES += [  # order of precedence
    (_rules("allow: /p", "disallow: /"), "BotA", "http://h.test/page", True),
    (_rules("allow: /folder", "disallow: /folder"), "BotA", "http://h.test/folder/page", True),
    (_rules("allow: /page", "disallow: /*.htm"), "BotA", "http://h.test/page.htm", False),
    (_rules("allow: /$", "disallow: /"), "BotA", "http://h.test/", True),
    (_rules("allow: /$", "disallow: /"), "BotA", "http://h.test/page.html", False),
]


@pytest.mark.parametrize(("text", "agent", "url", "expected"), CASES)
def test_allowed(text: str, agent: str, url: str, expected: bool) -> None:
    parser = RobotsTxtParser(text.encode(), agent)
    assert parser.allowed(url) is expected


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("last", ["\n", ""])
def test_line_endings(ending: str, last: str) -> None:
    text = ending.join(["User-Agent: a", "Allow: /x", "User-Agent: b", "", "", "Disallow: /"])
    rules, _, _ = compile_rules((text + (ending if last else "")).encode(), "b")
    assert rules == ("D/",)
    rules, _, _ = compile_rules(
        b"User-Agent: a\nAllow: /x\r\nUser-Agent: b\n\r\n\nDisallow: /", "b"
    )
    assert rules == ("D/",)


@pytest.mark.parametrize(
    ("prefix", "read"),
    [(b"\xef\xbb\xbf", True), (b"\xef\xbb", True), (b"\xef", True), (b"\xef\x11\xbf", False)],
)
def test_byte_order_marks(prefix: bytes, read: bool) -> None:
    rules, _, _ = compile_rules(prefix + b"User-Agent: foo\nAllow: /v\nDisallow: /\n", "foo")
    assert (rules == ("A/v", "D/")) is read
    # a BOM in the middle of the file spoils its line
    rules, _, _ = compile_rules(b"User-Agent: foo\n\xef\xbb\xbfAllow: /v\nDisallow: /\n", "foo")
    assert rules == ("D/",)


def test_sitemaps_anywhere() -> None:
    for text in (
        b"User-Agent: a\nAllow: /p\nUser-Agent: b\n\n\nSitemap: http://h.test/s.xml\n",
        b"Sitemap: http://h.test/s.xml\nUser-Agent: a\nAllow: /p\nUser-Agent: b\n",
    ):
        assert compile_rules(text, "a")[2] == ("http://h.test/s.xml",)


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("", "/"),
        ("http://www.h.test", "/"),
        ("http://www.h.test/", "/"),
        ("http://www.h.test/a", "/a"),
        ("http://www.h.test/a/", "/a/"),
        ("http://www.h.test/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
        ("http://www.h.test/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("h.test", "/"),
        ("h.test/", "/"),
        ("h.test/a", "/a"),
        ("h.test/a/", "/a/"),
        ("h.test/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
        ("a", "/"),
        ("a/", "/"),
        ("/a", "/a"),
        ("a/b", "/b"),
        ("h.test?a", "/?a"),
        ("h.test/a;b#c", "/a;b"),
        ("//a/b/c", "/b/c"),
    ],
)
def test_path_of(url: str, path: str) -> None:
    assert path_of(url) == path


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("http://www.h.test", "http://www.h.test"),
        ("/a/b/c", "/a/b/c"),
        ("á", "%C3%A1"),
        ("%aa", "%AA"),
    ],
)
def test_escape_pattern(raw: str, escaped: str) -> None:
    assert escape_pattern(raw.encode()) == escaped


@pytest.mark.parametrize(
    ("agent", "token"),
    [
        ("larbinscrapy/0.1 (+https://github.com/larbinscrapy/larbinscrapy)", "larbinscrapy"),
        ("FooBot", "foobot"),
        ("Foobot-Bar/2.1", "foobot-bar"),
        ("Foo_Bar", "foo_bar"),
        ("Foo Bar", "foo"),
        ("", ""),
        ("ツ", ""),
        ("MJ12bot/v1.4", "mj12bot"),
    ],
)
def test_product_token(agent: str, token: str) -> None:
    assert product_token(agent) == token
