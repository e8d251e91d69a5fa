"""larbin's NamedSite and okSites: per-site queues in memory, grouped by IP, served round robin.

Pure bookkeeping, no I/O: the scheduler feeds sites from the disk tiers and asks ``next_ready``
for the next (IP, site) whose politeness allows a request now. Only IPs with queued work are
tracked here; whether an IP may go, and when, is the shared ``IpTable``'s answer.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from larbinscrapy.politeness import IpState, IpTable

# Site states: waiting for DNS, servable, dropped (DNS failure, SSRF guard, dead IP).
RESOLVING, READY, DEAD = "resolving", "ready", "dead"

Entry = tuple[int, int, bytes]  # (fifo index, record id, record)


@dataclass(slots=True, eq=False)
class Site:
    """One site (scheme://host:port): its URLs waiting in memory, capped (maxUrlsBySite)."""

    key: str
    host: str
    state: str = RESOLVING
    ip: str | None = None
    reason: str | None = None
    queue: deque[Entry] = field(default_factory=deque)


class IpRing:
    """IPs with queued sites; ``ready`` in round-robin order, cooling IPs in a heap by time."""

    def __init__(self, table: IpTable) -> None:
        self.table = table
        self.sites: dict[str, deque[Site]] = {}  # ip -> sites with queued URLs, round robin
        self._ready: deque[str] = deque()
        self._cooling: list[tuple[float, str]] = []
        self._placed: set[str] = set()  # IPs currently in _ready or _cooling

    def add_site(self, site: Site) -> None:
        """A READY site got URLs: make sure it and its IP take part in the rotation."""
        ip = site.ip
        assert ip is not None
        sites = self.sites.setdefault(ip, deque())
        if site not in sites:
            sites.append(site)
        self.place(ip)

    def place(self, ip: str) -> None:
        """Put ``ip`` where it belongs now: ready, cooling, or nowhere (busy / no work)."""
        if ip in self._placed or not self.sites.get(ip):
            return
        st = self.table.get(ip)
        wait = self.table.wait(st, self.table.clock())
        if wait is None:
            return  # dropped, or busy: the release listener places it again
        self._placed.add(ip)
        if wait <= 0:
            self._ready.append(ip)
        else:
            heapq.heappush(self._cooling, (self.table.next_start(st), ip))

    def next_ready(self, now: float) -> tuple[IpState, Site] | None:
        """The next IP allowed to fetch now and the site whose turn it is on that IP."""
        cooling = self._cooling
        while cooling and cooling[0][0] <= now:
            self._ready.append(heapq.heappop(cooling)[1])
        while self._ready:
            ip = self._ready.popleft()
            self._placed.discard(ip)
            st = self.table.get(ip)
            sites = self.sites.get(ip)
            if not sites or st.dead:
                continue
            if not self.table.available(st, now):
                self.place(ip)
                continue
            site = sites[0]
            sites.rotate(-1)
            return st, site
        return None

    def site_emptied(self, site: Site) -> None:
        sites = self.sites.get(site.ip or "")
        if sites is not None and site in sites:
            sites.remove(site)
            if not sites:
                del self.sites[site.ip or ""]

    def next_wakeup(self) -> float | None:
        """When the earliest cooling IP becomes ready (monotonic clock), if any."""
        return self._cooling[0][0] if self._cooling else None

    def dead_ip_sites(self, ip: str) -> list[Site]:
        """Forget an IP's sites (the IP was dropped); the caller drops their URLs."""
        self._placed.discard(ip)
        return list(self.sites.pop(ip, ()))
