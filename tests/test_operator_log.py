"""What an operator reads in the log: nothing alarming on a normal crawl, and one line asking for
a contact before the crawler meets the real web with the placeholder user agent.

Nothing here leaves loopback: the "real web" seed is a public-looking name that ``LARBIN_RESOLVE``
pins to the test web's loopback IP.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest
from scrapy.settings.default_settings import USER_AGENT as SCRAPY_USER_AGENT

from larbinscrapy.politeness import contact
from settings import base
from tests.support.crawl import run_crawl, seeds_args

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

_ALARMS = re.compile(r"^\S+ \S+ \[[^]]+\] (WARNING|ERROR|CRITICAL): .*$", re.MULTILINE)
_CONTACT_HINT = "LARBIN_FROM"
REAL_LOOKING = "www.larbinscrapy-contact-check.net"  # pinned to loopback below, never resolved


@pytest.mark.crawl
def test_a_normal_crawl_of_the_test_web_logs_no_warning_or_error(web: RunningWeb, tmp_path: Path):
    # The test web has what any web has (a 500 page, 404s, robots.txt refusals, duplicates):
    # counted in stats, none of it a WARNING or an ERROR. No JOBDIR: a one-off crawl is normal.
    crawl = run_crawl(web, tmp_path / "out", *seeds_args(web.seeds))
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert crawl.stats["retry/max_reached"] >= 1  # the 500 page was met, and counted
    assert _ALARMS.findall(crawl.stderr) == [], _ALARMS.findall(crawl.stderr)
    assert _CONTACT_HINT not in crawl.stderr  # .test names are not the real web


@pytest.mark.crawl
def test_real_web_seed_with_the_placeholder_agent_logs_how_to_set_a_contact(
    web: RunningWeb, tmp_path: Path
):
    seed = f"http://{REAL_LOOKING}:{web.port}/"
    resolve = json.dumps({**web.resolve, REAL_LOOKING: web.resolve["h00.test"]})
    crawl = run_crawl(
        web,
        tmp_path / "out",
        *seeds_args([seed]),
        settings={"LARBIN_RESOLVE": resolve, "CLOSESPIDER_PAGECOUNT": 3},
    )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    hints = [line for line in crawl.stderr.splitlines() if _CONTACT_HINT in line]
    assert len(hints) == 1, crawl.stderr[-3000:]
    assert "USER_AGENT" in hints[0] and "WARNING" in hints[0]
    # With a contact, the same crawl says nothing.
    crawl = run_crawl(
        web,
        tmp_path / "out2",
        *seeds_args([seed]),
        settings={
            "LARBIN_RESOLVE": resolve,
            "CLOSESPIDER_PAGECOUNT": 3,
            "LARBIN_FROM": "ops@larbinscrapy-contact-check.net",
        },
    )
    assert crawl.returncode == 0
    assert _CONTACT_HINT not in crawl.stderr


def test_contact_decision():
    real = ["https://www.debian.org/", "http://127.0.0.1:8000/"]
    loopback = [
        "http://127.0.0.1:8000/",
        "http://[::1]/",
        "http://localhost:8080/",
        "http://h00.test:80/",
        "http://a.localhost/",
        "http://x.invalid/",
    ]
    for agent in (base.USER_AGENT, SCRAPY_USER_AGENT, ""):
        assert contact.missing(agent, "", real)
        assert not contact.missing(agent, "", loopback)  # a test or a demo: nobody to contact
        assert not contact.missing(agent, "ops@example.org", real)
    assert not contact.missing("mybot/1.0 (+https://bot.example.org/)", "", real)
    assert not contact.missing(base.USER_AGENT, "", [])
