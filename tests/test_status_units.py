"""The status page's pure parts: port ranges, rates, busiest hosts, payloads, metrics, the log
line, the token file."""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.error import CannotListenError
from twisted.internet.protocol import ServerFactory

from larbinscrapy.parse.urls import MAX_PORT
from larbinscrapy.status import metrics
from larbinscrapy.status.auth import read_job_files, remove_job_files, save_job_files
from larbinscrapy.status.extension import is_loopback, listen_first_free, parse_port_range
from larbinscrapy.status.history import HostCounter, RateHistory
from larbinscrapy.status.inject import BadPayload, parse_batch
from larbinscrapy.status.logline import format_line
from larbinscrapy.status.snapshot import build_status, group

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.mark.parametrize(
    ("value", "ports"),
    [
        ([8081, 8181], [8081, 8181]),
        ("8081,8181", [8081, 8181]),
        ("8081", [8081]),
        (8081, [8081]),
        (["9000", "9010"], [9000, 9010]),
        (0, None),
        ("0", None),
        ("", None),
        ([], None),
        (None, None),
    ],
)
def test_port_range(value, ports):
    assert parse_port_range(value) == ports


@pytest.mark.parametrize("value", ["x", "8181,8081", "1,2,3", "70000", [-1], "80;81"])
def test_bad_port_range_is_one_clear_error(value):
    with pytest.raises(ValueError, match="LARBIN_STATUS_PORT must be a port or a range"):
        parse_port_range(value)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.1.5", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.2", False),
        ("example.org", False),
    ],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def _stats(pages, items, size):
    return {
        "response_received_count": pages,
        "item_scraped_count": items,
        "downloader/response_bytes": size,
    }


def test_rates_and_series():
    history = RateHistory(keep=3600, interval=1.0)
    assert history.rates() == {"pages_per_s": 0.0, "items_per_s": 0.0, "bytes_per_s": 0.0}
    for t in range(21):
        history.sample(1000.0 + t, _stats(10 * t, 5 * t, 1000 * t))
    assert history.rates(window=10) == {
        "pages_per_s": 10.0,
        "items_per_s": 5.0,
        "bytes_per_s": 1000.0,
    }
    series = history.series()
    assert len(series["t"]) == 20 and set(series["pages_per_s"]) == {10.0}
    assert history.series(since=1015.0)["t"] == [1016.0, 1017.0, 1018.0, 1019.0, 1020.0]


def test_history_keeps_only_the_last_hour():
    history = RateHistory(keep=60, interval=1.0)
    for t in range(500):
        history.sample(float(t), _stats(t, 0, 0))
    assert len(history.samples) == 61
    assert history.samples[0].t == 439.0


def test_host_counter_keeps_the_busiest_when_pruning():
    counter = HostCounter(limit=100)
    for _ in range(50):
        counter.count("big.example")
    for i in range(1000):
        counter.count(f"once{i}.example")
    assert len(counter.counts) <= 100
    assert counter.top(1) == [("big.example", 50)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b'["http://a.example/"]', "expected"),
        (b'{"urls": "http://a.example/"}', "expected"),
        (b'{"urls": [1]}', "must be a string"),
        (b'{"urls": [], "priority": "yes"}', "priority"),
        (b'{"urls": [], "depth": -1}', "depth"),
        (b'{"urls": [], "depth": true}', "depth"),
        (json.dumps({"urls": ["http://a.example/"] * 11}).encode(), "at most 10"),
    ],
)
def test_bad_payloads(body, message):
    with pytest.raises(BadPayload, match=message):
        parse_batch(body, max_urls=10)


def test_payload():
    batch = parse_batch(b'{"urls": [" http://a.example/ "], "priority": true, "depth": 2}', 10)
    assert (batch.urls, batch.priority, batch.depth) == (["http://a.example/"], True, 2)


STATS = {
    "response_received_count": 120,
    "item_scraped_count": 100,
    "downloader/response_bytes": 50_000,
    "larbin/filtered/extension": 7,
    "larbin/filtered/depth": 3,
    "larbin/dropped/ssrf": 2,
    "larbin/errors/TimeoutError": 1,
    "downloader/exception_type_count/twisted.internet.error.TimeoutError": 1,
    "downloader/exception_type_count/scrapy.exceptions.IgnoreRequest": 9,
    "downloader/response_status_count/200": 118,
    "downloader/response_status_count/404": 2,
    "larbin/frontier/to_wait": 4,
    "larbin/ip/cooling": 3,
    "larbin/dupefilter/fill_ratio": 0.25,
    "larbin/status/urls/queued": 1,
    "larbin/frontier/enqueued": 300,
    "start_time": "2026-01-01T00:00:00",
}
FRONTIER = {
    "queued": 42,
    "fifos": {"priority": 1, "priority-overflow": 0, "normal": 40, "normal-overflow": 1},
    "in_memory": 10,
    "sites": {"in_memory": 3, "resolving": 1, "dead": 0},
    "ips": {"ready": 2, "fetching": 1, "cooling": 3, "throttled": 1, "dead": 0},
    "seen": {"fill_ratio": 0.25, "estimated_fp_rate": 0.0039},
}


def _doc(**kw):
    args = {
        "stats": STATS,
        "frontier": FRONTIER,
        "rates": {"pages_per_s": 2.0, "items_per_s": 1.0, "bytes_per_s": 900.0},
        "paused": False,
        "stopping": False,
        "uptime": 12.0,
        "busiest": [("a.example", 9)],
        "dns_cached": 5,
        "worker": "w:1",
    }
    args.update(kw)
    return build_status(**args)


def test_status_document():
    doc = _doc()
    assert (doc["pages"], doc["items"], doc["queued"]) == (120, 100, 42)
    assert doc["filtered"] == {"extension": 7, "depth": 3}
    assert doc["dropped"] == {"ssrf": 2}
    assert doc["errors"] == {"TimeoutError": 2}  # deliberate drops (IgnoreRequest) left out
    assert doc["status_codes"] == {"200": 118, "404": 2}
    assert doc["frontier"]["fifos"]["normal"] == 40 and "ips" not in doc["frontier"]
    assert doc["seen"]["estimated_fp_rate"] == 0.0039
    assert doc["stats"]["larbin/frontier/to_wait"] == 4
    json.dumps(doc)  # JSON-ready as it is


def test_group_by_suffix():
    assert group({"a/x": 1, "b/x": 2, "a/y": "text", "c/z": 5}, ("a/", "b/")) == {"x": 3}


def test_metrics_parse_with_help_and_types():
    text = metrics.render(_doc(paused=True)).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert all(name.startswith("larbin_") for name in families)
    assert all(f.documentation for f in families.values())
    assert families["larbin_pages"].type == "counter"
    assert families["larbin_pages"].samples[0].value == 120
    assert families["larbin_paused"].samples[0].value == 1
    fifo = {s.labels["fifo"]: s.value for s in families["larbin_frontier_fifo"].samples}
    assert fifo == {"priority": 1, "priority-overflow": 0, "normal": 40, "normal-overflow": 1}
    filtered = {s.labels["reason"]: s.value for s in families["larbin_filtered"].samples}
    assert filtered == {"extension": 7, "depth": 3}
    assert families["larbin_frontier_to_wait"].type == "counter"
    assert families["larbin_ip_cooling"].type == "gauge"
    assert families["larbin_dupefilter_fill_ratio"].type == "gauge"
    assert families["larbin_seen_estimated_fp_rate"].samples[0].value == 0.0039


def test_log_line():
    line, prev = format_line(STATS, FRONTIER, (60, 40, 4), interval=60.0)
    assert line == (
        "Crawled 120 pages (60/min), 100 items (60/min); queued 42 (priority 1, "
        "priority-overflow 0, normal 40, normal-overflow 1, in memory 10), 3 sites "
        "in memory; IPs ready 2, fetching 1, cooling 3, throttled 1, dead 0; "
        "filtered 6 since the last line"
    )
    assert prev == (120, 100, 10)
    shared = {"queued": 9, "shared": {"queued": 500, "leased": 7}, "ips": {}}
    line, _ = format_line(STATS, shared, prev, interval=30.0)
    assert "queued 9 (shared: 500 queued, 7 leased)" in line
    assert line.startswith("Crawled 120 pages (0/min)")


def test_job_files_are_private_and_removed(tmp_path: Path):
    save_job_files(str(tmp_path), "s3cret", "http://127.0.0.1:8081")
    assert stat.S_IMODE(os.stat(tmp_path / "http-token").st_mode) == 0o600
    assert read_job_files(str(tmp_path)) == ("s3cret", "http://127.0.0.1:8081")
    remove_job_files(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        read_job_files(str(tmp_path))


@pytest.fixture
def rival_between_bind_and_listen(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A port that another crawl binds too and starts listening on between our bind and listen.

    Two crawls started together (scrapyd jobs, distributed workers) both bind the first port of
    the range (SO_REUSEADDR lets them while neither listens); the one that calls ``listen()``
    second gets EADDRINUSE from the kernel. The race is real; only its timing is forced here.
    """
    with socket.socket() as rival:
        rival.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rival.bind(("127.0.0.1", 0))
        port = rival.getsockname()[1]
        real_listen = socket.socket.listen

        def listen_second(sock: socket.socket, *args: int) -> None:
            if sock is not rival and sock.getsockname() == ("127.0.0.1", port):
                real_listen(rival)
            real_listen(sock, *args)

        monkeypatch.setattr(socket.socket, "listen", listen_second)
        yield port


def test_a_port_lost_between_bind_and_listen_moves_on(rival_between_bind_and_listen: int) -> None:
    port = rival_between_bind_and_listen
    listening = listen_first_free([port, min(port + 20, MAX_PORT)], "127.0.0.1", ServerFactory())
    try:
        assert port < listening.getHost().port <= port + 20
    finally:
        listening.stopListening()


def test_the_last_port_lost_between_bind_and_listen_is_cannot_listen(
    rival_between_bind_and_listen: int,
) -> None:
    port = rival_between_bind_and_listen
    with pytest.raises(CannotListenError) as raised:
        listen_first_free([port], "127.0.0.1", ServerFactory())
    assert raised.value.socketError.errno == errno.EADDRINUSE
