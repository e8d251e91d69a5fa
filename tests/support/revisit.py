"""The revisit tests' schedule (a fast rule) and their reading of the changing web's log."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from testweb.changing import REVISIT_HOSTS
from testweb.harness import SITE_FILES

if TYPE_CHECKING:
    from collections.abc import Iterable

RULE = {
    "LARBIN_REVISIT": True,
    "LARBIN_REVISIT_INTERVAL": 1.0,
    "LARBIN_REVISIT_INTERVAL_MIN": 0.25,
    "LARBIN_REVISIT_INTERVAL_MAX": 8.0,
    "LARBIN_REVISIT_STREAK": 2,
    "LARBIN_REVISIT_BUCKET": 0.05,
    "LARBIN_FRONTIER_CHECKPOINT_INTERVAL": 0.2,
}
EARLY = 0.05  # seconds a fetch may precede its due time (clock reads on two processes)


def by_page(
    log: list[dict[str, Any]], hosts: Iterable[str] = REVISIT_HOSTS
) -> dict[str, list[dict[str, Any]]]:
    """The log's records of the revisited hosts' pages, by ``host + path``."""
    revisited = set(hosts)
    pages: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in log:
        if record["host"] in revisited and record["path"] not in SITE_FILES:
            pages[record["host"] + record["path"]].append(record)
    return pages


def gaps(records: list[dict[str, Any]]) -> list[float]:
    """The times between consecutive records."""
    return [b["t"] - a["t"] for a, b in itertools.pairwise(records)]


def revisit_entries_per_master(cluster: Any, key: str = "larbin:revisit") -> dict[int, int]:
    """Revisit entries (fields of every ``...<key>:state`` hash) each master of ``cluster``
    (``tests/support/cluster.py``) holds, read from each master's own keys."""
    import redis

    out = {}
    for port in sorted(set(cluster.master_of_slot().values())):
        node = redis.Redis(host="127.0.0.1", port=port)
        try:
            out[port] = sum(node.hlen(k) for k in node.scan_iter(match=f"*{key}*:state"))
        finally:
            node.close()
    return out
