"""``GET /metrics``: the status document in Prometheus' text format (prometheus-client)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from larbinscrapy.status.snapshot import GROUPS

if TYPE_CHECKING:
    from collections.abc import Iterator

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Labelled counter families: document key -> (metric name, label, help).
_LABELLED = {
    "filtered": ("larbin_filtered", "reason", "Links dropped before the frontier, by filter"),
    "dropped": ("larbin_dropped", "reason", "Requests dropped after queueing (dns, ssrf...)"),
    "errors": ("larbin_errors", "type", "Download and spider errors, by exception type"),
    "status_codes": ("larbin_responses_by_status", "status", "Responses by HTTP status"),
}
# Stats written as levels (``set_value``): they may go down, so they are gauges. Every other
# ``larbin/`` stat is only ever incremented, a counter (Prometheus' ``rate()`` reads a counter
# that goes down as a restart). tests/test_metrics_types.py checks every ``set_value`` in the code.
_GAUGE_STATS = re.compile(
    r"larbin/(ip/|host/|revisit/pending$|frontier/left_queued$|seeds/(valid|invalid)$"
    r"|dupefilter/(bits_set|fill_ratio|estimated_fp_rate|filters)$)"
)
_BAD_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(stat: str) -> str:
    """``larbin/frontier/to_wait`` -> ``larbin_frontier_to_wait`` (a counter adds ``_total``)."""
    return "larbin_" + _BAD_CHARS.sub("_", stat.removeprefix("larbin/")).strip("_").lower()


def is_gauge(stat: str) -> bool:
    """True for a ``larbin/`` stat that is a level (may go down), False for a count."""
    return _GAUGE_STATS.match(stat) is not None


class StatusCollector(Collector):
    """A one-shot collector over one status document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def collect(self) -> Iterator[Metric]:
        doc = self.doc
        yield _counter("larbin_pages", "Responses received", doc["pages"])
        yield _counter("larbin_items", "Items scraped", doc["items"])
        yield _counter("larbin_response_bytes", "Response bytes downloaded", doc["bytes"])
        yield _gauge("larbin_queued", "Requests in the frontier (disk and memory)", doc["queued"])
        yield _gauge("larbin_paused", "1 while the crawl is paused", int(doc["paused"]))
        yield _gauge("larbin_uptime_seconds", "Seconds since the crawl started", doc["uptime_s"])
        frontier = doc["frontier"]
        if "in_memory" in frontier:
            yield _gauge(
                "larbin_frontier_in_memory", "Requests held in memory", frontier["in_memory"]
            )
        yield _labelled_gauge(
            "larbin_frontier_fifo", "fifo", "Requests per frontier FIFO", frontier.get("fifos", {})
        )
        yield _labelled_gauge(
            "larbin_shared_frontier",
            "count",
            "The shared (Redis) frontier: queued, leased, seeds, workers",
            frontier.get("shared", {}),
        )
        yield _labelled_gauge(
            "larbin_sites", "state", "Sites with URLs in memory, by state", doc["sites"]
        )
        yield _labelled_gauge("larbin_ips", "state", "Server IPs by politeness state", doc["ips"])
        if doc["dns"]["cached"] is not None:
            yield _gauge("larbin_dns_cached", "Hostnames in the DNS cache", doc["dns"]["cached"])
        for name in ("fill_ratio", "estimated_fp_rate"):
            value = doc["seen"].get(name)
            if value is not None:
                yield _gauge(f"larbin_seen_{name}", f"Seen-set {name.replace('_', ' ')}", value)
        for key, (name, label, text) in _LABELLED.items():
            family = CounterMetricFamily(name, text, labels=[label])
            for value, count in doc[key].items():
                family.add_metric([value], count)
            yield family
        yield from _other_stats(doc["stats"])


def _other_stats(stats: dict[str, Any]) -> Iterator[Metric]:
    grouped = tuple(p for _, prefixes in GROUPS for p in prefixes)
    names: set[str] = set()
    for key, value in stats.items():
        if (
            not key.startswith("larbin/")
            or key.startswith(grouped)
            or isinstance(value, bool)
            or not isinstance(value, int | float)
        ):
            continue
        name = metric_name(key)
        if name in names:
            continue
        names.add(name)
        if is_gauge(key):
            yield _gauge(name, f"larbinscrapy stat {key}", value)
        else:
            yield _counter(name, f"larbinscrapy stat {key}", value)


def _counter(name: str, text: str, value: float) -> Metric:
    return CounterMetricFamily(name, text, value=value)


def _gauge(name: str, text: str, value: float) -> Metric:
    return GaugeMetricFamily(name, text, value=value)


def _labelled_gauge(name: str, label: str, text: str, values: dict[str, Any]) -> Metric:
    family = GaugeMetricFamily(name, text, labels=[label])
    for key, value in values.items():
        if isinstance(value, int | float):
            family.add_metric([key], value)
    return family


def render(doc: dict[str, Any]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatusCollector(doc))
    return generate_latest(registry)
