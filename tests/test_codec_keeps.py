"""Requests keep all they carry through the disk frontier (issue 26, finding 2).

Each request goes through a real ``LarbinScheduler`` with a ``JOBDIR``, which is closed and
opened again before the request is taken out: what comes back was read from the disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Request, Spider
from scrapy.http import FormRequest, JsonRequest
from scrapy.utils.test import get_crawler

from larbinscrapy.frontier import codec
from larbinscrapy.frontier.scheduler import LarbinScheduler
from settings import base
from tests.support.crawl import settings_of

if TYPE_CHECKING:
    from pathlib import Path

URL = "http://127.0.0.1:8080/a"


class KeepSpider(Spider):
    """Owns the callback a stored request names."""

    name = "keep"

    def parse_form(self, response: Any, **kwargs: Any) -> None:  # pragma: no cover
        return None


class TaggedRequest(Request):
    """A user's subclass with an attribute of its own (kept like ``JsonRequest.dumps_kwargs``)."""

    attributes = (*Request.attributes, "tag")

    def __init__(self, *args: Any, tag: str = "", **kwargs: Any) -> None:
        self.tag = tag
        super().__init__(*args, **kwargs)


class Unpicklable:
    """A value neither JSON nor pickle can hold."""

    def __reduce__(self) -> Any:
        raise TypeError("not this one")


def _wait(d: Any) -> None:
    if d is not None:
        loop = asyncio.get_event_loop()
        loop.run_until_complete(asyncio.wait_for(d.asFuture(loop), 10))


class DiskFrontier:
    """A scheduler on a JOBDIR, closed and reopened between the push and the pop."""

    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        self.settings = settings_of(
            base,
            JOBDIR=str(tmp_path / "job"),
            DOWNLOAD_DELAY=0,
            LARBIN_ALLOWED_NETWORKS="127.0.0.0/8",
            **settings,
        )
        self.spider = KeepSpider()
        self.sched = self._open()

    def _open(self) -> LarbinScheduler:
        self.crawler = get_crawler(KeepSpider, self.settings)
        sched = LarbinScheduler.from_crawler(self.crawler)
        _wait(sched.open(self.spider))
        return sched

    def through_disk(self, request: Request) -> Request | None:
        request.dont_filter = True  # the same URL in every case
        assert self.sched.enqueue_request(request)
        _wait(self.sched.close("shutdown"))
        self.sched = self._open()
        deadline = time.monotonic() + 5
        while (back := self.sched.next_request()) is None and time.monotonic() < deadline:
            asyncio.get_event_loop().run_until_complete(asyncio.sleep(0.01))
        return back


@pytest.fixture
def frontier(tmp_path: Path) -> DiskFrontier:
    return DiskFrontier(tmp_path)


@pytest.mark.parametrize(
    "meta",
    [
        {"proxy": "http://127.0.0.1:3128"},
        {"dont_redirect": True, "handle_httpstatus_list": [301, 302]},
        {"cookiejar": 3},
        {"my_key": {"nested": [1, "two", None]}, "playwright": True},
    ],
)
def test_meta_keys_survive_the_disk(frontier, meta):
    back = frontier.through_disk(Request(URL, meta=dict(meta)))
    assert back is not None
    for key, value in meta.items():
        assert back.meta[key] == value, key


def test_form_request_survives(frontier):
    request = FormRequest(
        URL,
        formdata={"q": "larbin", "page": "2"},
        callback=frontier.spider.parse_form,
        cb_kwargs={"page": 2},
    )
    back = frontier.through_disk(request)
    assert type(back) is FormRequest
    assert back.method == "POST" and back.body == request.body
    assert back.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"
    assert back.cb_kwargs == {"page": 2}
    assert back.callback.__name__ == "parse_form"


def test_json_request_survives(frontier):
    request = JsonRequest(URL, data={"a": [1, 2]}, dumps_kwargs={"sort_keys": True})
    back = frontier.through_disk(request)
    assert type(back) is JsonRequest
    assert back.body == request.body and back.method == "POST"
    assert back.dumps_kwargs == {"sort_keys": True}


def test_a_subclass_survives_with_its_attribute(frontier):
    back = frontier.through_disk(TaggedRequest(URL, tag="blue", cookies={"sid": "1"}))
    assert type(back) is TaggedRequest
    assert back.tag == "blue"
    assert back.cookies == {"sid": "1"}


def test_transient_keys_are_dropped(frontier):
    back = frontier.through_disk(
        Request(URL, meta={"download_latency": 0.3, "keep": 1, "larbin_output_done": True})
    )
    assert back is not None
    assert "download_latency" not in back.meta and "larbin_output_done" not in back.meta
    assert back.meta["keep"] == 1


def test_an_unserializable_value_is_counted_and_logged_once(frontier, caplog):
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.frontier.base"):
        for n in range(3):
            request = Request(f"{URL}{n}", meta={"handle": object()})
            assert frontier.sched.enqueue_request(request)
    assert frontier.crawler.stats.get_value("larbin/frontier/unserializable") == 3
    lines = [r.getMessage() for r in caplog.records if "cannot be stored" in r.getMessage()]
    assert len(lines) == 1 and "meta['handle']" in lines[0], lines
    assert frontier.sched.next_request().meta["handle"] is not None  # kept in memory


def test_pickle_is_opt_in(tmp_path):
    frontier = DiskFrontier(tmp_path, LARBIN_FRONTIER_PICKLE=True)
    back = frontier.through_disk(Request(URL, meta={"when": {1, 2}, "plain": "x"}))
    assert back.meta["when"] == {1, 2} and back.meta["plain"] == "x"
    with pytest.raises(codec.UnserializableRequest, match="meta\\['bad'\\]"):
        codec.encode(Request(URL, meta={"bad": Unpicklable()}), None, allow_pickle=True)


def test_a_class_that_cannot_be_rebuilt_is_unserializable():
    class Needs(Request):
        def __init__(self, url: str, required: int, **kwargs: Any) -> None:
            super().__init__(url, **kwargs)

    with pytest.raises(codec.UnserializableRequest, match="rebuild"):
        codec.encode(Needs(URL, 1), None)


def test_records_of_the_earlier_format_still_read():
    old = b'["http://h.test/a",0,{"depth":2,"larbin_site_depth":1,"larbin_dont_filter":1}]'
    back = codec.decode(old, None)
    assert back.url == "http://h.test/a" and back.meta == {"depth": 2, "larbin_site_depth": 1}
    assert back.dont_filter
