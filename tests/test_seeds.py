"""Seeds: the pure parser as tables, then what `scrapy crawl larbin` does with good and bad."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from larbinscrapy.seeds.seedlist import (
    Seeds,
    SeedsError,
    check_url,
    parse_lines,
    parse_url_list,
    read_seeds_file,
)
from tests.support.crawl import ROOT, run_crawl, seeds_args


# -- one URL -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "http://a.com/",
        "https://a.com/",
        "http://a.com",
        "HTTP://A.COM/Path?q=1",
        "http://a.com:8080/x",
        "https://a.com:443/",
        "http://127.0.1.1:8000/",
        "http://[::1]:80/",
        "http://a.com/#frag",
    ],
)
def test_good_url(url):
    assert check_url(url) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://a.com/", "scheme must be http or https, got 'ftp'"),
        ("mailto:x@a.com", "scheme must be http or https, got 'mailto'"),
        ("a.com/page.html", "scheme must be http or https, got 'none'"),
        ("//a.com/", "scheme must be http or https, got 'none'"),
        ("http://", "no host"),
        ("http:///path", "no host"),
        ("http://:80/", "no host"),
        ("http://a.com:abc/", "malformed URL"),
        ("http://a.com:99999/", "malformed URL"),
        ("http://a.com:-1/", "malformed URL"),
        ("http://a.com:0/", "port 0"),
        ("http://a.com/a b", "contains whitespace"),
        ("http://a.com/\tx", "contains whitespace"),
        ("http://[::1/", "malformed URL"),
    ],
)
def test_bad_url(url, reason):
    assert check_url(url).startswith(reason)


# -- a file's lines ------------------------------------------------------------------------------
def test_comments_blank_lines_and_whitespace_are_skipped():
    lines = [
        "# my seeds",
        "",
        "   ",
        "http://a.com/",
        "  http://b.com/  ",
        "\thttp://c.com/\t",
        "   # an indented comment",
    ]
    assert parse_lines(lines, "seeds.txt") == Seeds(
        ["http://a.com/", "http://b.com/", "http://c.com/"], []
    )


def test_duplicates_are_kept_once_in_input_order():
    lines = ["http://b.com/", "http://a.com/", "http://b.com/", " http://a.com/"]
    assert parse_lines(lines, "s").urls == ["http://b.com/", "http://a.com/"]


def test_bad_lines_are_reported_with_source_and_line_number():
    lines = [
        "# header",  # 1
        "http://a.com/",  # 2
        "ftp://a.com/",  # 3
        "",  # 4
        "http://a.com:abc/",  # 5
        "not a url",  # 6
        "http://",  # 7
        "https://b.com/",  # 8
    ]
    seeds = parse_lines(lines, "seeds.txt")
    assert seeds.urls == ["http://a.com/", "https://b.com/"]
    assert [re.match(r"seeds\.txt:(\d+): ", e).group(1) for e in seeds.errors] == [
        "3",
        "5",
        "6",
        "7",
    ]
    assert seeds.errors[0] == "seeds.txt:3: scheme must be http or https, got 'ftp': 'ftp://a.com/'"
    assert seeds.errors[2].startswith("seeds.txt:6: contains whitespace")
    assert seeds.errors[3].startswith("seeds.txt:7: no host")


def test_a_huge_bad_line_is_cut_in_the_message():
    seeds = parse_lines(["ftp://a.com/" + "x" * 10_000], "s")
    assert len(seeds.errors) == 1
    assert len(seeds.errors[0]) < 300


def test_a_seed_over_the_url_length_limit_is_reported_with_its_line_number():
    # The gate drops URLs longer than URLLENGTH_LIMIT without a word: a seed that long was
    # accepted, then silently never fetched (issue 34).
    long_url = "http://a.com/" + "x" * 600
    seeds = parse_lines(["http://a.com/", long_url, "http://b.com/"], "seeds.txt", 512)
    assert seeds.urls == ["http://a.com/", "http://b.com/"]
    assert len(seeds.errors) == 1
    assert seeds.errors[0].startswith(
        "seeds.txt:2: longer than URLLENGTH_LIMIT (613 > 512 characters): 'http://a.com/xxx"
    )
    assert parse_url_list(f"http://a.com/,{long_url}", 512).errors[0].startswith("urls:2: longer")
    assert parse_lines([long_url], "s").urls == [long_url]  # 0: no limit


# -- files ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "urls"),
    [
        (b"http://a.com/\nhttp://b.com/\n", ["http://a.com/", "http://b.com/"]),
        (b"http://a.com/\r\nhttp://b.com/\r\n", ["http://a.com/", "http://b.com/"]),  # CRLF
        (b"http://a.com/\rhttp://b.com/", ["http://a.com/", "http://b.com/"]),  # old Mac CR
        (b"\xef\xbb\xbfhttp://a.com/\n", ["http://a.com/"]),  # UTF-8 BOM
        (b"\xef\xbb\xbf# comment\r\nhttp://a.com/\r\n", ["http://a.com/"]),  # BOM + CRLF
        (b"http://a.com/", ["http://a.com/"]),  # no final newline
        (b"", []),
        (b"\n\n# nothing\n", []),
    ],
)
def test_file_formats(tmp_path, data, urls):
    path = tmp_path / "seeds.txt"
    path.write_bytes(data)
    seeds = read_seeds_file(path)
    assert seeds.urls == urls
    assert seeds.errors == []


def test_file_line_numbers_count_crlf_lines_once(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_bytes(b"\xef\xbb\xbf# c\r\n\r\nhttp://a.com/\r\nbad\r\nhttp://b.com/\r\n")
    seeds = read_seeds_file(path)
    assert seeds.urls == ["http://a.com/", "http://b.com/"]
    assert len(seeds.errors) == 1
    assert seeds.errors[0].startswith("seeds.txt:4: ")


def test_missing_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "nope" / "seeds.txt"
    with pytest.raises(SeedsError, match=re.escape(str(path))):
        read_seeds_file(path)


def test_unreadable_file_is_an_error_naming_it(tmp_path):
    # a directory: unreadable as a file even by root
    with pytest.raises(SeedsError, match=re.escape(str(tmp_path))):
        read_seeds_file(tmp_path)


# -- -a urls=... ---------------------------------------------------------------------------------
def test_url_list():
    seeds = parse_url_list("http://a.com/, https://b.com/x,,ftp://c.com/,http://a.com/")
    assert seeds.urls == ["http://a.com/", "https://b.com/x"]
    assert seeds.errors == ["urls:4: scheme must be http or https, got 'ftp': 'ftp://c.com/'"]


def test_url_list_with_a_bom():
    assert parse_url_list("\ufeffhttp://a.com/").urls == ["http://a.com/"]


# -- the spider, as users run it -------------------------------------------------------------------
def scrapy_crawl(*args: str) -> subprocess.CompletedProcess[str]:
    """``scrapy crawl larbin ARGS`` for runs that stop before any request is made."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "larbin", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " ERROR: " in line]


def _assert_one_clear_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = _error_lines(result.stderr)
    assert len(errors) == 1, result.stderr[-3000:]
    assert "larbin: " in errors[0]
    for word in words:
        assert word in errors[0]


@pytest.mark.crawl
def test_missing_seeds_file_exits_non_zero_with_one_line_naming_it(tmp_path):
    path = tmp_path / "no-such-seeds.txt"
    result = scrapy_crawl("-a", f"seeds={path}")
    _assert_one_clear_error(result, str(path))


@pytest.mark.crawl
def test_seeds_file_without_a_valid_url_exits_non_zero(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_text("# only bad lines\nftp://a.test/\nnot-a-url\n")
    result = scrapy_crawl("-a", f"seeds={path}")
    _assert_one_clear_error(result, "no valid seed URL", str(path))
    assert "seeds.txt:2: scheme must be http or https" in result.stderr
    assert "seeds.txt:3: scheme must be http or https" in result.stderr


@pytest.mark.crawl
def test_a_seed_line_over_the_url_length_limit_is_a_bad_seed_with_its_line_number(tmp_path):
    path = tmp_path / "seeds.txt"
    path.write_text("# too long\nhttp://a.test/" + "x" * 600 + "\n")
    result = scrapy_crawl("-a", f"seeds={path}", "-s", "LARBIN_STATUS_PORT=0")
    _assert_one_clear_error(result, "no valid seed URL", str(path))
    assert "seeds.txt:2: longer than URLLENGTH_LIMIT (614 > 512 characters)" in result.stderr


@pytest.mark.crawl
def test_no_seeds_at_all_exits_non_zero():
    _assert_one_clear_error(scrapy_crawl(), "-a seeds=FILE", "-a urls=")


@pytest.mark.parametrize(
    ("arg", "words"),
    [("depth=deep", ["-a depth=", "'deep'"]), ("external=maybe", ["-a external=", "'maybe'"])],
)
@pytest.mark.crawl
def test_bad_spider_argument_exits_non_zero_with_one_line(arg, words):
    _assert_one_clear_error(scrapy_crawl("-a", "urls=http://a.test/", "-a", arg), *words)


@pytest.mark.crawl
def test_bad_lines_are_logged_and_the_good_seeds_crawled(web, tmp_path):
    good = web.seeds
    lines = [
        "\ufeff# seeds for the test web",  # 1
        good[0],  # 2
        "",  # 3
        "ftp://h00.test/file",  # 4
        f"http://h00.test:{web.port}/a page.html",  # 5
        f"  {good[1]}  ",  # 6
        "http://h01.test:notaport/",  # 7
        good[0],  # 8: a duplicate, silently dropped
    ]
    path = tmp_path / "seeds.txt"
    path.write_bytes("\r\n".join(lines).encode())
    crawl = run_crawl(
        web, tmp_path / "out", "-a", f"seeds={path}", "-a", "depth=0", "-a", "external=false"
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.fetched(web.port) == web.web.ground_truth(good, depth=0, external=False)
    for lineno, reason in (
        (4, "scheme must be http or https"),
        (5, "contains whitespace"),
        (7, "malformed URL"),
    ):
        assert f"seeds.txt:{lineno}: {reason}" in crawl.stderr
    assert "seeds.txt:8" not in crawl.stderr
    assert crawl.stats["larbin/seeds/valid"] == 2
    assert crawl.stats["larbin/seeds/invalid"] == 3


@pytest.mark.crawl
def test_urls_argument(web, tmp_path):
    seeds = [web.url("h02.test", "/"), web.url("h06.test", "/map.html")]
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(seeds), "-a", "depth=1")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    truth = web.web.ground_truth(seeds, depth=1)
    assert web.url("h00.test", "/") not in truth  # the test web's own seeds are not crawled
    assert crawl.fetched(web.port) == truth
