"""``/metrics`` types each stat by how it moves: a counter never goes down, a level is a gauge.

A counter that goes down breaks Prometheus' ``rate()`` (it reads the drop as a restart):
``larbin_host_cooling_total`` was seen going down. One test reads every ``set_value`` of a
``larbin/`` stat in the code (levels, written as they are); the other samples a live crawl's
``/metrics`` and checks how every series moved against its ``# TYPE`` line.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from itertools import pairwise
from typing import TYPE_CHECKING

import pytest
from prometheus_client.parser import text_string_to_metric_families

from larbinscrapy.status import metrics
from tests.support.crawl import ROOT
from tests.support.status import LiveCrawl

if TYPE_CHECKING:
    from pathlib import Path

    from testweb.harness import RunningWeb

# Levels that go up and down during any crawl of the test web (politeness gauges sampled every
# LARBIN_STATS_INTERVAL; the revisit schedule's pending pages).
UP_AND_DOWN = (
    "larbin_host_active",
    "larbin_host_cooling",
    "larbin_host_seen",
    "larbin_ip_active",
    "larbin_ip_cooling",
    "larbin_ip_seen",
    "larbin_queued",
    "larbin_revisit_pending",
)
_SET_VALUE = re.compile(r"""set_value\(\s*f?["'](larbin/[^"'{]*)(\{)?""")


def test_every_level_written_with_set_value_is_a_gauge():
    written = set()
    for path in (ROOT / "larbinscrapy").rglob("*.py"):
        for match in _SET_VALUE.finditer(path.read_text()):
            prefix, formatted = match.groups()
            written.add(prefix + ("any" if formatted else ""))
    assert {"larbin/host/any", "larbin/ip/active", "larbin/revisit/pending"} <= written
    counters = sorted(key for key in written if not metrics.is_gauge(key) and key != "larbin/fatal")
    assert not counters, f"levels exported as counters: {counters}"
    assert not metrics.is_gauge("larbin/frontier/to_wait")  # a count stays a counter
    assert not metrics.is_gauge("larbin/revisit/scheduled")


def _sample(text: str) -> tuple[dict[str, str], dict[tuple, float]]:
    """(family name -> type, (sample name, labels) -> value) of one /metrics answer."""
    types, values = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            values[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return types, values


@pytest.mark.crawl
def test_metrics_types_follow_the_stats_of_a_live_crawl(web: RunningWeb, tmp_path: Path):
    crawl = LiveCrawl(
        web,
        tmp_path / "out",
        settings={"DOWNLOAD_DELAY": 0.2, "LARBIN_STATS_INTERVAL": 0.1, "LARBIN_REVISIT": True},
    )
    types: dict[str, str] = {}
    series: dict[tuple, list[float]] = defaultdict(list)
    try:
        deadline = time.monotonic() + 60
        pages = 0.0
        while time.monotonic() < deadline and pages < 150:
            code, text = crawl.call("GET", "/metrics")
            assert code == 200
            sample_types, values = _sample(text)
            types.update(sample_types)
            for key, value in values.items():
                series[key].append(value)
            pages = values.get(("larbin_pages_total", ()), 0.0)
            time.sleep(0.15)
        crawl.call("POST", "/api/stop")
        assert crawl.wait(60) == 0
    finally:
        crawl.kill()
    assert pages >= 150, crawl.log()[-3000:]
    family_of = {}
    for name, kind in types.items():
        for suffix in ("", "_total"):
            family_of[name + suffix] = (name, kind)
    went_down = {
        key[0] for key, values in series.items() if any(b < a for a, b in pairwise(values))
    }
    counters_down = sorted(n for n in went_down if family_of[n][1] == "counter")
    assert not counters_down, f"counters that went down: {counters_down}"
    assert went_down & {"larbin_host_active", "larbin_ip_active", "larbin_queued"}  # seen moving
    not_gauges = {n: types.get(n) for n in UP_AND_DOWN if types.get(n) != "gauge"}
    assert not not_gauges, f"up-and-down stats not typed gauge: {not_gauges}"
