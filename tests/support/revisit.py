"""The revisit tests' schedule (a fast rule) and their reading of the changing web's log."""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from larbinscrapy import meta as M
from larbinscrapy.revisit.extension import RevisitExtension
from tests.support.crawl import LARBIN_DEFAULTS
from testweb.changing import REVISIT_HOSTS
from testweb.harness import SITE_FILES

if TYPE_CHECKING:
    from collections.abc import Iterable

    from larbinscrapy.revisit.entry import Entry
    from tests.support.cores import ManualClock

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


# -- the extension in this process, on a fake clock (the schedule is the real one) ---------------
def local_revisits(clock: ManualClock, **settings: Any) -> RevisitExtension:
    """A ``RevisitExtension`` with its local schedule (no JOBDIR), reading ``clock``."""
    crawler = get_crawler(settings_dict={**LARBIN_DEFAULTS, "LARBIN_REVISIT": True, **settings})
    ext = RevisitExtension.from_crawler(crawler)
    ext.clock = clock
    ext.schedule.store.clock = clock  # type: ignore[union-attr]
    return ext


def taken(ext: RevisitExtension, now: float) -> list[Entry]:
    """The entries a take at ``now`` hands out (the local schedule answers at once)."""
    out: list[Entry] = []
    ext.schedule.take(now).addCallback(out.extend)
    return out


def fetch(
    ext: RevisitExtension,
    url: str,
    status: int,
    token: str | None = None,
    body: bytes = b"<p>x</p>",
) -> Request:
    """Report a fetch of ``url`` (a revisit when ``token`` is given) answering ``status``."""
    request = Request(url, meta={M.REVISIT: token} if token else {})
    ext.fetched(request, HtmlResponse(url, status=status, body=body, request=request))
    return request
