"""The frontier's compact request records (``larbinscrapy.frontier.codec``): tables of cases."""

from __future__ import annotations

import json

import pytest
from scrapy import Request, Spider

from larbinscrapy.frontier import codec


class RecordSpider(Spider):
    """Owns the callback and errback that records name."""

    name = "record"

    def parse_page(self, response):  # pragma: no cover - only referenced by name
        return []

    def on_error(self, failure):  # pragma: no cover - only referenced by name
        return None


SPIDER = RecordSpider()
URL = "http://h01.test:8080/a/b.html?x=1&y=2"


def _round_trip(request: Request) -> Request:
    return codec.decode(codec.encode(request, SPIDER), SPIDER)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, {"url": URL, "priority": 0, "method": "GET", "body": b""}),
        ({"priority": 7}, {"priority": 7}),
        ({"priority": -3}, {"priority": -3}),
        ({"url": "http://h02.test/caf%C3%A9?q=%20"}, {"url": "http://h02.test/caf%C3%A9?q=%20"}),
        (
            {"method": "POST", "body": b"k=v&\xff\x00"},
            {"method": "POST", "body": b"k=v&\xff\x00"},
        ),
        ({"method": "POST"}, {"method": "POST", "body": b""}),
        ({"method": "PUT", "body": b"{}"}, {"method": "PUT", "body": b"{}"}),
    ],
)
def test_round_trip_fields(kwargs, expected):
    kwargs = {"url": URL, **kwargs}
    back = _round_trip(Request(**kwargs))
    for name, value in expected.items():
        assert getattr(back, name) == value, name


def test_round_trip_headers():
    request = Request(
        URL,
        method="POST",
        body=b"a=1",
        headers={"Content-Type": "application/x-www-form-urlencoded", "X-Multi": ["one", "two"]},
    )
    back = _round_trip(request)
    assert back.headers.getlist("X-Multi") == [b"one", b"two"]
    assert back.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"
    assert back.body == b"a=1"


@pytest.mark.parametrize(
    ("meta", "kept"),
    [
        ({"depth": 3, "larbin_site_depth": 1}, {"depth": 3, "larbin_site_depth": 1}),
        ({"larbin_referer": "http://h00.test/"}, {"larbin_referer": "http://h00.test/"}),
        (
            {"retry_times": 1, "redirect_times": 2, "redirect_ttl": 18},
            {"retry_times": 1, "redirect_times": 2, "redirect_ttl": 18},
        ),
        (
            {"redirect_urls": ["http://a.test/", "http://b.test/"]},
            {"redirect_urls": ["http://a.test/", "http://b.test/"]},
        ),
        (
            {"download_timeout": 12.5, "dont_obey_robotstxt": True},
            {"download_timeout": 12.5, "dont_obey_robotstxt": True},
        ),
        ({"larbin_priority": 1}, {"larbin_priority": 1}),
        # one trip through the downloader: never stored (a user's keys are: test_codec_keeps.py)
        (
            {
                "larbin_lease": "127.0.0.1",
                "larbin_rid": (2, 5),
                "download_slot": "127.0.0.1",
                "larbin_ip": "127.0.0.1",
                "download_latency": 0.2,
                "larbin_output_done": True,
            },
            {},
        ),
    ],
)
def test_meta_kept_and_dropped(meta, kept):
    back = _round_trip(Request(URL, meta=meta))
    assert dict(back.meta) == kept


def test_admitted_mark_survives_as_the_url_itself():
    # The gate's mark must equal request.url again, or the dupefilter would test the URL twice.
    record = codec.encode(Request(URL, meta={"larbin_admitted": URL}), SPIDER)
    assert URL.encode() not in record.replace(URL.encode(), b"", 1)  # stored once, not twice
    assert _round_trip(Request(URL, meta={"larbin_admitted": URL})).meta["larbin_admitted"] == URL
    other = _round_trip(Request(URL, meta={"larbin_admitted": "http://else.test/"}))
    assert "larbin_admitted" not in other.meta


@pytest.mark.parametrize(
    ("callback", "errback"),
    [("parse_page", None), (None, "on_error"), ("parse_page", "on_error"), (None, None)],
)
def test_callbacks_by_name(callback, errback):
    request = Request(
        URL,
        callback=getattr(SPIDER, callback) if callback else None,
        errback=getattr(SPIDER, errback) if errback else None,
    )
    record = json.loads(codec.encode(request, SPIDER))
    assert callback in record or callback is None
    back = codec.decode(codec.encode(request, SPIDER), SPIDER)
    assert (back.callback.__name__ if back.callback else None) == callback
    assert (back.errback.__name__ if back.errback else None) == errback
    if callback:
        assert back.callback.__self__ is SPIDER


def test_record_is_compact():
    record = codec.encode(Request(URL, meta={"depth": 2, "larbin_site_depth": 1}), SPIDER)
    assert record == json.dumps([URL, 0, [2, 1]], separators=(",", ":")).encode()


PAGE = "http://h01.test:8080/a/index.html"


def _linked(url: str, referer_header: str | None = PAGE, **meta) -> Request:
    """A request as the link gate makes it: depths, the page that linked, the gate's mark,
    the spider's errback, and the Referer header its referer policy chose."""
    headers = {"Referer": referer_header} if referer_header else None
    meta = {
        "larbin_admitted": url,
        "depth": 3,
        "larbin_site_depth": 2,
        "larbin_referer": PAGE,
        **meta,
    }
    return Request(url, errback=SPIDER.on_error, meta=meta, headers=headers)


def _same(a: Request, b: Request) -> None:
    assert (b.url, b.priority, b.method, b.body) == (a.url, a.priority, a.method, a.body)
    assert dict(b.meta) == dict(a.meta)
    assert dict(b.headers) == dict(a.headers)
    assert (b.callback, b.errback) == (a.callback, a.errback)


@pytest.mark.parametrize(
    ("request_", "record"),
    [
        # the referer stored once, from its path: the header and the gate's mark are flags
        (_linked(URL), [URL, 0, [3, 2, "/a/index.html", 3], None, "on_error"]),
        # another origin: the referer whole; a policy that sends the origin only: flag 4
        (
            _linked("http://other.test/x", referer_header="http://h01.test:8080/"),
            ["http://other.test/x", 0, [3, 2, PAGE, 5], None, "on_error"],
        ),
        # a Referer header the referer does not explain is stored as it is
        (
            _linked(URL, referer_header="http://else.test/"),
            [
                URL,
                0,
                [3, 2, "/a/index.html", 1],
                None,
                "on_error",
                "GET",
                "",
                {"Referer": ["http://else.test/"]},
            ],
        ),
        # a seed: depth 0 and site depth 0 are depths, not defaults
        (Request(URL, meta={"depth": 0, "larbin_site_depth": 0}), [URL, 0, [0, 0]]),
        # no header (a policy that sends none), other meta kept beside the fields
        (
            _linked(URL, referer_header=None, retry_times=1),
            [URL, 0, [3, 2, "/a/index.html", 1, {"retry_times": 1}], None, "on_error"],
        ),
    ],
)
def test_a_linked_request_is_stored_once_and_comes_back_whole(request_, record):
    data = codec.encode(request_, SPIDER)
    assert json.loads(data) == record
    _same(request_, codec.decode(data, SPIDER))


def test_a_linked_request_costs_little_more_than_its_url():
    data = codec.encode(_linked(URL), SPIDER)
    assert len(data) <= len(URL) + len("/a/index.html") + 35, data


def test_the_plain_layout_holds_what_json_cannot_when_pickle_is_allowed():
    request_ = _linked(URL, obj={1, 2})
    with pytest.raises(codec.UnserializableRequest, match="obj"):
        codec.encode(request_, SPIDER)
    back = codec.decode(codec.encode(request_, SPIDER, allow_pickle=True), SPIDER)
    _same(request_, back)


def test_records_with_the_referer_twice_still_read():
    old = json.dumps(
        [
            URL,
            0,
            {"depth": 3, "larbin_site_depth": 2, "larbin_referer": PAGE, "larbin_admitted": 1},
            None,
            "on_error",
            "GET",
            "",
            {"Referer": [PAGE]},
        ]
    ).encode()
    _same(_linked(URL), codec.decode(old, SPIDER))


@pytest.mark.parametrize(
    "request_",
    [
        Request(URL),
        Request("http://h03.test/é?q=ü"),
        Request(URL, method="POST", body=b"x", callback=SPIDER.parse_page),
        Request(URL, meta={"depth": 4, "larbin_referer": 'http://a.test/"quoted"'}),
    ],
)
def test_url_of(request_):
    assert codec.url_of(codec.encode(request_, SPIDER)) == request_.url


@pytest.mark.parametrize(
    "request_",
    [
        Request(URL, callback=lambda response: None),
        Request(URL, callback=RecordSpider().parse_page),  # a method of another spider
        Request(URL, errback=print),
        Request(URL, meta={"larbin_referer": object()}),  # a kept key JSON cannot hold
    ],
)
def test_unserializable_raises(request_):
    with pytest.raises(codec.UnserializableRequest):
        codec.encode(request_, SPIDER)


def test_dont_filter_cb_kwargs_and_flags_survive_the_disk():
    request = Request(
        "http://h.test/a",
        callback=SPIDER.parse_page,
        dont_filter=True,
        cb_kwargs={"page": 2, "tags": ["x"]},
        flags=["seed"],
    )
    back = _round_trip(request)
    assert back.dont_filter is True
    assert back.cb_kwargs == {"page": 2, "tags": ["x"]}
    assert back.flags == ["seed"]
    assert not any(k.startswith("larbin_") and k != "larbin_admitted" for k in back.meta)
    plain = _round_trip(Request("http://h.test/b"))
    assert plain.dont_filter is False and plain.cb_kwargs == {} and plain.flags == []


def test_unserializable_cb_kwargs_raise():
    with pytest.raises(codec.UnserializableRequest):
        codec.encode(Request("http://h.test/a", cb_kwargs={"obj": object()}), SPIDER)
