"""larbin.conf -> settings: a table of real larbin.conf lines, unknown keys with line numbers,
``-s`` winning, and a real crawl configured by a larbin.conf."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from scrapy.settings import Settings

from larbinscrapy.conf.larbinconf import LarbinConfAddon, LarbinConfError, parse, read
from tests.support.crawl import ROOT, run_crawl

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

# larbin 2.6.3's own larbin.conf, as shipped.
LARBIN_263 = """\
###############################################
# Who are you ?
# mail of the one who launched larbin (YOUR mail)
From larbin2.6.3@unspecified.mail
# name of the bot (sent with http headers)
UserAgent larbin_2.6.3

############################################
# What are the inputs and ouputs of larbin
# port on which is launched the http statistic webserver
# if unset or set to 0, no webserver is launched
httpPort 8081
# port on which you can submit urls to fetch
# no input is possible if you comment this line or use port 0
#inputPort 1976

############################################
# parameters to adapt depending on your network
# Number of connexions in parallel (to adapt depending of your network speed)
pagesConnexions 100
# Number of dns calls in parallel
dnsConnexions 5
# How deep do you want to go in a site
depthInSite 5
# do you want to follow external links
#noExternalLinks
# time between 2 calls on the same server (in sec) : NEVER less than 30
waitDuration 60
# Make requests through a proxy (use with care)
#proxy www 8080

##############################################
# now, let's customize the search

# first page to fetch (you can specify several urls)
startUrl http://slashdot.org/

# Do you want to limit your search to a specific domain ?
# if yes, uncomment the following line
#limitToDomain .fr .dk .uk end

# What are the extensions you surely don't want
# never forbid .html, .htm and so on : larbin needs them
forbiddenExtensions
.tar .gz .tgz .zip .Z .rpm .deb
.ps .dvi .pdf
.png .jpg .jpeg .bmp .smi .tiff .gif
.mov .avi .mpeg .mpg .mp3 .qt .wav .ram .rm
.jar .java .class .diff
.doc .xls .ppt .mdb .rtf .exe .pps .so .psd
end
"""


def test_larbin_263_default_file():
    conf = parse(LARBIN_263)
    assert conf.warnings == []
    assert conf.settings == {
        "DEFAULT_REQUEST_HEADERS": {"From": "larbin2.6.3@unspecified.mail"},
        "USER_AGENT": "larbin_2.6.3",
        "LARBIN_STATUS_PORT": [8081, 8081],
        "CONCURRENT_REQUESTS": 100,
        "REACTOR_THREADPOOL_MAXSIZE": 5,
        "LARBIN_DEPTH": 5,
        "DOWNLOAD_DELAY": 60.0,
        "LARBIN_URLS": "http://slashdot.org/",
        "LARBIN_GATE_FORBIDDEN_EXTENSIONS": (
            ".tar .gz .tgz .zip .Z .rpm .deb .ps .dvi .pdf .png .jpg .jpeg .bmp .smi .tiff .gif"
            " .mov .avi .mpeg .mpg .mp3 .qt .wav .ram .rm .jar .java .class .diff .doc .xls .ppt"
            " .mdb .rtf .exe .pps .so .psd"
        ),
    }


@pytest.mark.parametrize(
    ("line", "settings"),
    [
        ("From me@example.org", {"DEFAULT_REQUEST_HEADERS": {"From": "me@example.org"}}),
        ("UserAgent mybot/1.0", {"USER_AGENT": "mybot/1.0"}),
        ("useragent mybot", {"USER_AGENT": "mybot"}),  # larbin compares keys with strcasecmp
        ("httpPort 9090", {"LARBIN_STATUS_PORT": [9090, 9090]}),
        ("httpPort 0", {"LARBIN_STATUS_PORT": 0}),
        ("inputPort 1976", {}),
        ("pagesConnexions 20", {"CONCURRENT_REQUESTS": 20}),
        ("dnsConnexions 3", {"REACTOR_THREADPOOL_MAXSIZE": 3}),
        ("depthInSite 2", {"LARBIN_DEPTH": 2}),
        ("noExternalLinks", {"LARBIN_EXTERNAL": False}),
        ("waitDuration 30", {"DOWNLOAD_DELAY": 30.0}),
        ("waitDuration 0.5", {"DOWNLOAD_DELAY": 0.5}),
        ("startUrl http://a.example/", {"LARBIN_URLS": "http://a.example/"}),
        (
            "StartUrl http://a.example/\nstartUrl http://b.example/x",
            {"LARBIN_URLS": "http://a.example/,http://b.example/x"},
        ),
        ("limitToDomain .fr .dk .uk end", {"LARBIN_DOMAINS": ".fr,.dk,.uk"}),
        (
            "forbiddenExtensions\n.tar .gz\n.pdf\nend",
            {"LARBIN_GATE_FORBIDDEN_EXTENSIONS": ".tar .gz .pdf"},
        ),
        ("depthInSite 3 # a comment after the value", {"LARBIN_DEPTH": 3}),
        ("#depthInSite 3", {}),
        ("", {}),
    ],
)
def test_lines(line, settings):
    conf = parse(line)
    assert conf.warnings == []
    assert conf.settings == settings


def test_input_port_says_where_urls_go_now():
    assert "POST /api/urls" in parse("inputPort 1976").notes[0]
    assert parse("inputPort 0").notes == []


def test_unknown_keys_and_bad_values_are_warned_with_line_numbers(tmp_path: Path):
    path = tmp_path / "larbin.conf"
    path.write_text(
        "# my old larbin.conf\n"
        "From me@example.org\n"
        "saveDir /var/larbin 2\n"  # line 3: unknown, its values skipped
        "depthInSite deep\n"  # line 4: not a number
        "pagesConnexions 50\n"
        "proxy www 8080\n"  # line 6: explained
        "startUrl ftp://old.example/\n"  # line 8? no: line 7
        "limitToDomain .fr\n"  # line 8: no end
    )
    conf = read(str(path))
    where = str(path)
    assert conf.warnings == [
        f"{where}:3: unknown key 'saveDir' ignored",
        f"{where}:4: depthInSite takes a non-negative integer, got 'deep'",
        f"{where}:6: proxy: Scrapy takes its proxy from the environment: run the crawl with "
        "http_proxy=http://www:8080 (and https_proxy)",
        f"{where}:7: StartUrl 'ftp://old.example/' skipped: scheme must be http or https, "
        "got 'ftp'",
        f"{where}:8: limitToDomain has no closing 'end'; the list runs to the end of the file",
    ]
    assert conf.settings == {
        "DEFAULT_REQUEST_HEADERS": {"From": "me@example.org"},
        "CONCURRENT_REQUESTS": 50,
        "LARBIN_DOMAINS": ".fr",
    }


def test_missing_file_is_one_clear_error(tmp_path: Path):
    with pytest.raises(LarbinConfError, match=r"LARBIN_CONF: cannot read .*nope.conf"):
        read(str(tmp_path / "nope.conf"))


def test_command_line_wins_and_headers_merge(tmp_path: Path):
    path = tmp_path / "larbin.conf"
    path.write_text("waitDuration 60\ndepthInSite 2\nFrom me@example.org\n")
    settings = Settings()
    settings.setmodule("settings.base", priority="project")
    settings.set("LARBIN_CONF", str(path), priority="cmdline")
    settings.set("DOWNLOAD_DELAY", 0.25, priority="cmdline")  # -s DOWNLOAD_DELAY=0.25
    LarbinConfAddon().update_settings(settings)
    assert settings.getfloat("DOWNLOAD_DELAY") == 0.25
    assert settings.getint("LARBIN_DEPTH") == 2  # base.py's default gives way
    headers = settings.getdict("DEFAULT_REQUEST_HEADERS")
    assert headers["From"] == "me@example.org" and "Accept" in headers  # Scrapy's kept


@pytest.mark.crawl
def test_a_crawl_configured_by_larbin_conf(web: RunningWeb, tmp_path: Path):
    seed = web.seeds[0]
    conf = tmp_path / "larbin.conf"
    conf.write_text(f"startUrl {seed}\ndepthInSite 0\nhttpPort 0\nmaxPages 10\n")
    crawl = run_crawl(web, tmp_path / "run", settings={"LARBIN_CONF": str(conf)})
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert f"{conf}:4: unknown key 'maxPages' ignored" in crawl.stderr
    assert "Status page:" not in crawl.stderr  # httpPort 0
    assert crawl.fetched(web.port) == {seed}  # depthInSite 0: the seed only

    deeper = run_crawl(
        web, tmp_path / "deeper", settings={"LARBIN_CONF": str(conf), "LARBIN_DEPTH": 1}
    )
    assert deeper.returncode == 0, deeper.stderr[-3000:]
    assert len(deeper.fetched(web.port)) > 1  # -s LARBIN_DEPTH=1 beats depthInSite 0


@pytest.mark.crawl
def test_a_missing_larbin_conf_fails_the_crawl_in_one_line(tmp_path: Path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "larbin",
            "-a",
            "urls=http://127.0.0.1:9/",
            "-s",
            f"LARBIN_CONF={tmp_path / 'nope.conf'}",
            "-s",
            "LARBIN_STATUS_PORT=0",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert f"ERROR: LARBIN_CONF: cannot read {tmp_path / 'nope.conf'}" in done.stderr
    assert "Traceback" not in done.stderr
