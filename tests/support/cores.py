"""Stand-ins for the crawler parts the pure cores take (a clock, stats), and those cores built
with the defaults of ``settings/base.py``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from larbinscrapy.politeness.hosts import HostTable
from larbinscrapy.politeness.ipsites import IpTable
from settings import base


class ManualClock:
    """A clock the test sets: ``clock()`` is ``clock.now``, for the cores that take a callable."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingStats:
    """The part of Scrapy's stats collector that pure cores use: counters only."""

    def __init__(self) -> None:
        self.values: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.values[key] += count


def host_table(delay: float, *, clock: Any, **options: Any) -> HostTable:
    """A ``HostTable`` (``DOWNLOAD_DELAY`` = ``delay``), defaults of ``settings/base.py``."""
    kwargs = {
        "max_crawl_delay": base.LARBIN_ROBOTS_CRAWL_DELAY_MAX,
        "max_retry_after": base.LARBIN_THROTTLE_RETRY_AFTER_MAX,
        "throttle_backoff": base.LARBIN_THROTTLE_BACKOFF,
        "max_backoff": base.LARBIN_THROTTLE_BACKOFF_MAX,
        "max_in_a_row": base.LARBIN_THROTTLE_IN_A_ROW_MAX,
        **options,
    }
    return HostTable(delay, clock=clock, **kwargs)


def ip_table(
    delay: float, connections: int = 1, *, clock: Any, host_delay: float = 0.0, **options: Any
) -> IpTable:
    """An ``IpTable`` (``LARBIN_IP_DELAY`` = ``delay``) with the defaults of ``settings/base.py``.

    Options of the host level (``max_crawl_delay``...) go to its ``HostTable``.
    """
    host_keys = {
        "max_crawl_delay",
        "max_retry_after",
        "throttle_backoff",
        "max_backoff",
        "max_in_a_row",
        "rng",
    }
    host_options = {k: options.pop(k) for k in list(options) if k in host_keys}
    kwargs = {
        "max_failures": base.LARBIN_IP_FAILURES_MAX,
        "backoff": base.LARBIN_IP_BACKOFF,
        **options,
    }
    hosts = host_table(host_delay, clock=clock, **host_options)
    return IpTable(delay, connections, clock=clock, hosts=hosts, **kwargs)
