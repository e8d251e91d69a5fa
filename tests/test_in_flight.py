"""Requests in flight sized from what the crawl meets (#35, point 5: latency hidden without
tuning ``CONCURRENT_REQUESTS`` by hand): where every answer takes long and the CPU is idle, the
crawl puts more requests in flight than ``CONCURRENT_REQUESTS``, within each host's one
connection; ``LARBIN_FETCH_IN_FLIGHT_MAX`` at or under it keeps Scrapy's fixed cap."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import TYPE_CHECKING

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from larbinscrapy.fetch.inflight import InFlightSizer, grown
from tests.test_warm_connections import SLACK, crawl_many_hosts
from testweb import manyhosts

pytestmark = pytest.mark.timing  # gaps to the millisecond at the server: make test runs it alone

if TYPE_CHECKING:
    from pathlib import Path


def most_arrivals_within(records: list[tuple[float, int, str, str]], window: float) -> int:
    """The most requests the server received within ``window`` seconds of each other."""
    times = sorted(t for t, _, _, _ in records)
    most, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


@pytest.mark.crawl
def test_a_slow_web_gets_more_requests_in_flight_than_concurrent_requests(tmp_path: Path) -> None:
    """120 hosts, one page each, every answer 0.3 s away, 4 requests at once by the setting:
    one request a slot every 0.3 s, so at most 8 could arrive within 0.3 s (a slot's request
    and the next one right after its answer). With the CPU idle the cap grows; a host's
    requests still come one at a time."""
    hosts, latency = 120, 0.3
    code, log, stats, records, port = crawl_many_hosts(
        tmp_path,
        hosts=hosts,
        pages=1,
        server=("--latency", str(latency)),
        settings={
            "DOWNLOAD_DELAY": 0,
            "LARBIN_IP_DELAY": 0,
            "LARBIN_IP_CONNECTIONS": 10,  # ten names an address: each may have its request out
            "CONCURRENT_REQUESTS": 4,
        },
    )
    assert code == 0, log[-4000:]
    assert stats.get("finish_reason") == "finished", stats
    summary = manyhosts.summary(records, port)
    assert not manyhosts.ground_truth(hosts, 1, port) - summary["pages"]
    assert summary["twice"] == 0
    assert most_arrivals_within(records, latency) > 8
    assert stats.get("larbin/fetch/in_flight_cap", 0) > 4, stats
    by_host: dict[str, list[float]] = defaultdict(list)
    for t, _, host, _ in records:
        by_host[host].append(t)
    closest = min(b - a for ts in by_host.values() for a, b in pairwise(sorted(ts)))
    assert closest >= latency - SLACK, "two requests out at once on one host"


def test_the_cap_grows_by_a_quarter_at_least_a_step_up_to_the_most() -> None:
    assert grown(4, 1024) == 12
    assert grown(128, 1024) == 160
    assert grown(1000, 1024) == 1024


@pytest.mark.parametrize("most", [0, 128])
def test_a_most_at_or_under_concurrent_requests_keeps_scrapys_fixed_cap(most: int) -> None:
    crawler = get_crawler(
        settings_dict={"CONCURRENT_REQUESTS": 128, "LARBIN_FETCH_IN_FLIGHT_MAX": most}
    )
    with pytest.raises(NotConfigured):
        InFlightSizer.from_crawler(crawler)


def test_the_cap_stops_at_the_open_connections_cap() -> None:
    """Requests past the connections the descriptors allow would only wait for one."""
    crawler = get_crawler(
        settings_dict={
            "CONCURRENT_REQUESTS": 16,
            "LARBIN_FETCH_IN_FLIGHT_MAX": 1024,
            "LARBIN_FETCH_CONNECTIONS_MAX": 100,
        }
    )
    assert InFlightSizer.from_crawler(crawler).most == 100
