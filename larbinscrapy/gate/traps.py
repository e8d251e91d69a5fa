"""Crawler-trap accounting: the per-site page budget and the cap on query strings per path."""

from __future__ import annotations

import logging
from collections import defaultdict

from xxhash import xxh3_64_intdigest

from larbinscrapy.parse.urls import site_of
from larbinscrapy.seen.flat import U64Table

logger = logging.getLogger(__name__)

SITE_BUDGET = "site_budget"
QUERIES = "queries"


class TrapGuard:
    """Counts new URLs per site and per path with a query; refuses those over the caps."""

    def __init__(self, max_pages_per_site: int, max_queries_per_path: int) -> None:
        if max_pages_per_site < 0 or max_queries_per_path < 0:
            raise ValueError(
                "LARBIN_GATE_PAGES_PER_SITE_MAX and LARBIN_GATE_QUERIES_PER_PATH_MAX "
                "must be >= 0 (0: off)"
            )
        self.max_pages_per_site = max_pages_per_site
        self.max_queries_per_path = max_queries_per_path
        # a count for every site of a broad crawl, kept to its end: keyed by a 64-bit hash of
        # the site, not its name, in a flat table (16-byte slots, not a dict of ints)
        self._sites = U64Table()
        self._paths: defaultdict[int, int] = defaultdict(int)
        self._logged: set[str] = set()

    @property
    def enabled(self) -> bool:
        return bool(self.max_pages_per_site or self.max_queries_per_path)

    def reason(self, url: str) -> str | None:
        """None (and ``url`` is counted) or the trap ``url`` falls in; ``url`` must be new."""
        path_key = None
        if self.max_queries_per_path:
            query_at = url.find("?")
            if query_at >= 0:
                path_key = xxh3_64_intdigest(url[:query_at].encode())
                if self._paths[path_key] >= self.max_queries_per_path:
                    return self._refuse(QUERIES, url, "distinct queries of its path")
        site = None
        if self.max_pages_per_site:
            site = xxh3_64_intdigest(site_of(url).encode())
            count = self._sites.get(site) or 0
            if count >= self.max_pages_per_site:
                return self._refuse(SITE_BUDGET, url, "URLs of its site")
            self._sites.set(site, count + 1)
        if path_key is not None:
            self._paths[path_key] += 1
        return None

    def _refuse(self, reason: str, url: str, what: str) -> str:
        if reason not in self._logged:  # log the first, the gate counts them all
            self._logged.add(reason)
            cap = self.max_pages_per_site if reason == SITE_BUDGET else self.max_queries_per_path
            logger.info(
                "Trap defence: %s refused after %d %s (larbin/filtered/%s counts the rest)",
                url,
                cap,
                what,
                reason,
            )
        return reason
