"""larbin's NamedSite and okSites: per-site queues in memory, grouped by IP, served round robin."""

from __future__ import annotations

import heapq
import itertools
from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from larbinscrapy.politeness.ipsites import IpState, IpTable

# Site states: waiting for DNS, servable, dropped (DNS failure, SSRF guard, dead IP).
RESOLVING, READY, DEAD = "resolving", "ready", "dead"

Entry = tuple[int, int, bytes]  # (fifo index, record id, record)
_MAX_U32 = 0xFFFF_FFFF  # the largest offset array("I") holds
_COMPACT_AT = 4096  # popped entries before the lists are compacted


class Overflow:
    """A crowded site's URLs kept on disk: (fifo index, record id, file offset), in order.

    12 bytes a URL in two flat arrays (8-byte offsets only past 4 GiB into a segment file),
    none of the record itself: the record stays where it was written once (a wait FIFO) and is
    read back by id when the site has room, so a site that stays full costs nothing however
    often the frontier is refilled.
    """

    __slots__ = ("_head", "_keys", "_offsets")

    def __init__(self) -> None:
        self._keys = array("q")  # rid * 4 + fifo index
        self._offsets = array("I")  # file offsets in their segment
        self._head = 0

    def append(self, index: int, rid: int, offset: int) -> None:
        self._keys.append(rid * 4 + index)
        if offset > _MAX_U32 and self._offsets.typecode == "I":  # huge records: widen
            self._offsets = array("q", self._offsets)
        self._offsets.append(offset)

    def popleft(self) -> tuple[int, int, int]:
        """The oldest entry: (fifo index, record id, offset)."""
        head = self._head
        key, offset = self._keys[head], self._offsets[head]
        self._head = head = head + 1
        if head >= _COMPACT_AT and head * 2 >= len(self._keys):  # compact, amortised O(1)
            del self._keys[:head]
            del self._offsets[:head]
            self._head = 0
        return key & 3, key >> 2, offset

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        for i in range(self._head, len(self._keys)):
            yield self._keys[i] & 3, self._keys[i] >> 2, self._offsets[i]

    def __len__(self) -> int:
        return len(self._keys) - self._head


@dataclass(slots=True, eq=False)
class Site:
    """One site (scheme://host:port): its URLs waiting in memory, capped (maxUrlsBySite)."""

    key: str
    host: str
    state: str = RESOLVING
    ip: str | None = None
    reason: str | None = None
    # a list, not a deque: most sites hold one or two URLs (a deque is 760 bytes empty), and
    # popping the front of at most ``maxUrlsBySite`` entries costs less than the deque saves
    queue: list[Entry] = field(default_factory=list)
    overflow: Overflow | None = None  # URLs past the cap, on disk (created when first needed)
    head: int = 0  # priority-tier URLs at the front of the queue, served before the rest
    out: int = 0  # its URLs handed out and not acknowledged: the site stays while they are
    due: float = -1.0  # when its entry in IpRing's warm heap is due (older entries are stale)
    ring: int = 0  # the stamp of its live entry in its IP's rotation (IpRing), 0: not in it


# an entry of an IP's rotation: the site and the stamp it was put there with (IpRing)
Turn = tuple[Site, int]


def _stale(when: float, site: Site) -> bool:
    """A warm entry whose site was served since (or has a later entry), emptied or dropped."""
    return when != site.due or not site.queue or site.state != READY or site.ip is None


# seconds: the longest started sites may keep the rotation from a turn (the sites not started
# yet start at one a second at least when the crawl cannot start every fetch that is due)
ROTATION_EVERY = 1.0


class IpRing:
    """IPs with queued sites; ``ready`` in round-robin order, cooling IPs in a heap by time.

    A started site (a page of it out, or its fetch just ended: its server's connection is
    open, or a priority-tier URL first in its queue: a redirect's target, an injected URL)
    with URLs queued also waits in ``_warm``: if the rotation has not served it
    ``grace`` seconds (``DOWNLOAD_DELAY``) after its host may go again, it goes then, ahead
    of the rotation, if its IP allows, or first on its IP once the IP is free. So a started
    site is fetched again within two delays while the connection its last page left is
    open; sites not started yet wait (they have no connection to lose), yet still start
    while an IP's rotation has room (a shared IP is not left with a few hosts at the end).
    Where the crawl cannot start every fetch that is due (a bandwidth cap, every slot taken)
    started sites would take them all and the others not start until they ran out of URLs:
    the rotation goes first when it has waited ``ROTATION_EVERY`` seconds for a turn.
    """

    def __init__(self, table: IpTable, grace: float = 0.0) -> None:
        self.table = table
        self.grace = grace  # a started site waits in the rotation this long past its time
        # ip -> its sites with queued URLs, round robin. A shared address holds thousands: a
        # site leaves or moves to the front in O(1), its entry left behind stale (its stamp
        # is no longer the site's ``ring``) and dropped when the rotation meets it
        self.sites: dict[str, deque[Turn]] = {}
        self._live: dict[str, int] = {}  # ip -> its live entries
        self._stamps = itertools.count(1)
        self._ready: deque[str] = deque()
        self._cooling: list[tuple[float, str]] = []
        self._placed: set[str] = set()  # IPs currently in _ready or _cooling
        self._warm: list[tuple[float, int, Site]] = []  # (host's next start, order, site)
        self._order = itertools.count()
        self.serving: dict[str, Site] = {}  # host -> its site, once served, while in memory
        self._rotation_at = float("-inf")  # the rotation's last turn (or last time it was idle)

    def add_site(self, site: Site) -> None:
        """A READY site got URLs: make sure it and its IP take part in the rotation (a site
        with a page out, or a priority-tier URL first in its queue, first on its IP)."""
        ip = site.ip
        assert ip is not None
        # fetched just now (its connection open), or its next URL is a redirect's target (the
        # rest of a fetch: its robots.txt was read just now) or injected: next on the IP
        if site.out or site.head:
            if not site.ring:
                self._enter(ip, site, first=True)
            self.warm(site, self.table.next_start(self.table.get(ip), site.host))
        elif not site.ring:
            self._enter(ip, site, first=False)
        self.place(ip)

    def _enter(self, ip: str, site: Site, *, first: bool) -> None:
        """Put ``site`` in its IP's rotation, first or last (an entry it had goes stale)."""
        if not site.ring:
            self._live[ip] = self._live.get(ip, 0) + 1
        site.ring = stamp = next(self._stamps)
        sites = self.sites.setdefault(ip, deque())
        if first:
            sites.appendleft((site, stamp))
        else:
            sites.append((site, stamp))

    def place(self, ip: str, now: float | None = None) -> None:
        """Put ``ip`` where it belongs at ``now`` (the clock's): ready, cooling, or nowhere
        (busy / no work)."""
        if ip in self._placed or not self._live.get(ip):
            return
        st = self.table.get(ip)
        wait = self.table.wait(st, self.table.clock() if now is None else now)
        if wait is None:
            return  # dropped, or busy: the release listener places it again
        self._placed.add(ip)
        if wait <= 0:
            self._ready.append(ip)
        else:
            heapq.heappush(self._cooling, (self.table.next_start(st), ip))

    def next_ready(self, now: float) -> tuple[IpState, Site] | None:
        """The next IP allowed to fetch now and the site whose turn it is on that IP: a
        started site first, but the rotation at least every ``ROTATION_EVERY`` seconds."""
        if self._warm and now - self._rotation_at < ROTATION_EVERY:
            warm = self._warm_ready(now)
            if warm is not None:
                return warm
        picked = self._rotation_ready(now)
        self._rotation_at = now  # its turn, taken or with nothing ready
        if picked is not None:
            return picked
        return self._warm_ready(now) if self._warm else None

    def _rotation_ready(self, now: float) -> tuple[IpState, Site] | None:
        """The next ready IP in round-robin order and the site whose turn it is on it."""
        cooling = self._cooling
        while cooling and cooling[0][0] <= now:
            self._ready.append(heapq.heappop(cooling)[1])
        while self._ready:
            ip = self._ready.popleft()
            self._placed.discard(ip)
            st = self.table.get(ip)
            sites = self.sites.get(ip)
            if sites is None or not self._live.get(ip) or st.dead:
                continue
            if not self.table.available(st, now):
                self.place(ip, now)  # at the same `now`: never ready again in this loop
                continue
            site = self._ready_site(st, sites, now)
            if site is None:  # every host on the IP cools down: back when the first is ready
                self._placed.add(ip)
                live = (s for s, stamp in sites if stamp == s.ring)
                when = min(self.table.next_start(st, s.host) for s in live)
                heapq.heappush(self._cooling, (when, ip))
                continue
            return st, site
        return None

    def warm(self, site: Site, when: float) -> None:
        """``site`` is started: serve it at ``when`` (its host's next start), before others."""
        when += self.grace
        if site.due != when:  # (every event of its IP tells it again)
            site.due = when
            heapq.heappush(self._warm, (when, next(self._order), site))

    def released(self, st: IpState, host: str) -> None:
        """A fetch of ``host`` ended (a page, its robots.txt, a sitemap): its site's next URL
        goes once the host's delay is over."""
        site = self.serving.get(host)
        if site is not None and site.queue and site.state == READY:
            self.warm(site, self.table.next_start(st, host))

    def _warm_ready(self, now: float) -> tuple[IpState, Site] | None:
        """A started site whose host and IP may go now (stale entries dropped on the way)."""
        warm = self._warm
        while warm and warm[0][0] <= now:
            when, _, site = heapq.heappop(warm)
            if _stale(when, site):
                continue
            ip = site.ip or ""  # (set: a READY site has one)
            st = self.table.get(ip)
            if st.dead:
                continue
            start = self.table.next_start(st, site.host)
            if start + self.grace > now:  # its delay was raised since (robots.txt, a sitemap)
                self.warm(site, start)
                continue
            if self.table.available(st, now, site.host):
                return st, site
            sites = self.sites.get(ip)  # its IP is busy: first on it when it is free
            if site.ring and sites and sites[0][1] != site.ring:
                self._enter(ip, site, first=True)
        return None

    def _ready_site(self, st: IpState, sites: deque[Turn], now: float) -> Site | None:
        """The next site in turn on ``st`` whose host may be fetched now (round robin; the
        stale entries met on the way are dropped, and the rest left live)."""
        for _ in range(len(sites)):
            site, stamp = sites.popleft()
            if stamp != site.ring:
                continue
            sites.append((site, stamp))
            if self.table.next_start(st, site.host) <= now:
                return site
        return None

    def site_emptied(self, site: Site) -> None:
        """``site`` has no URL queued: out of its IP's rotation (its entry goes stale)."""
        if not site.ring:
            return
        site.ring = 0
        ip = site.ip or ""
        live = self._live[ip] - 1
        if live:
            self._live[ip] = live
        else:  # nothing live left: the stale entries go with the IP's rotation
            del self._live[ip]
            del self.sites[ip]

    def next_wakeup(self) -> float | None:
        """When the earliest cooling IP or started site becomes ready (monotonic clock)."""
        warm = self._warm
        while warm and _stale(*warm[0][::2]):  # no wake-up for an entry that is gone
            heapq.heappop(warm)
        times = [heap[0][0] for heap in (self._cooling, warm) if heap]
        return min(times) if times else None

    def dead_ip_sites(self, ip: str) -> list[Site]:
        """Forget an IP's sites (the IP was dropped); the caller drops their URLs."""
        self._placed.discard(ip)
        self._live.pop(ip, None)
        live = [site for site, stamp in self.sites.pop(ip, ()) if stamp == site.ring]
        for site in live:
            site.ring = 0
        return live
