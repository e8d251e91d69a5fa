"""The end of a leased fetch in the shared frontier (a part of ``RedisScheduler``).

When the send-time gate gives a lease back, one ``release`` script tells every worker what
this one learnt, as the one-process crawl's ``IpTable`` and ``HostTable`` keep it: the IP is
ready again after its own delay (``LARBIN_IP_DELAY``, failure back-off, a throttling pause),
the host after its own (``DOWNLOAD_DELAY``, robots Crawl-delay, AutoThrottle, a pause), and
the host's throttling run goes on (a 429 without Retry-After doubles the back-off for all,
``LARBIN_THROTTLE_IN_A_ROW_MAX`` answers in a row over all workers set it aside) or ends (a
normal answer). In a cluster the IP's own lease (``iplease.py``) is released with the IP's
delay, after the shard's answer when a shared back-off pause must hold it.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from larbinscrapy.politeness.hosts import BACKOFF, JITTER, THROTTLED
from larbinscrapy.politeness.ipsites import NOCONNECTION

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from larbinscrapy.distributed.frontier import Released
    from larbinscrapy.distributed.held import HeldLeases
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.distributed.readiness import ShardClock
    from larbinscrapy.politeness import HostRegistry
    from larbinscrapy.politeness.ipsites import IpState

logger = logging.getLogger(__name__)


class Releases:
    """Sends each lease's release and applies its answer (module docstring)."""

    def __init__(
        self,
        link: FrontierLink,
        *,
        held: HeldLeases,
        clock: ShardClock,
        politeness: HostRegistry,
        stats: StatsCollector,
    ) -> None:
        self.link = link
        self.held = held
        self.clock = clock
        self.politeness = politeness
        self.stats = stats

    def released(self, st: IpState, host: str, outcome: str) -> None:
        """A leased fetch on ``st`` for ``host`` ended as ``outcome`` says (``IpTable``'s
        release listener).

        Queued in the Redis thread before any later pop (this worker's) can run; the delays
        count from when Redis runs it, so neither the IP nor the host is ready earlier."""
        held = self.held.take(st.ip)
        if held is None:
            return
        shard, rid = held
        link, table = self.link, self.politeness.table
        now = table.clock()
        delay = max(0.0, st.ready_at - now)
        host = host or st.last_host or ""
        hosts = table.hosts
        call = link.frontier(shard).release_call(
            link.worker,
            st.ip,
            delay,
            st.dead,
            host=host,
            host_delay=max(0.0, hosts.next_start(host) - now) if host else 0.0,
            outcome=outcome,
            jitter=1 + JITTER * hosts.rng() if outcome == BACKOFF else 1.0,
        )
        token = link.token(rid)
        if link.ips is None:
            link.send("release", call, then=partial(self._done, host))
        elif outcome == BACKOFF:  # the IP's own lease waits for the shared back-off pause
            link.send(
                "release", call, then=partial(self._done, host, ip=st.ip, token=token, delay=delay)
            )
        else:
            link.send("release", call, then=partial(self._done, host))
            link.send("iplease", link.ips.release_call(st.ip, token, delay))
        self.clock.sooner(shard, now + delay)

    def set_aside(self, host: str) -> None:
        """``host`` asked for a pause past the cap: no worker asks it again (its records go)."""
        _, frontier = self.link.frontier_of(host)
        self.link.jobs.submit(
            "set aside",
            frontier.aside_call(host),
            then=lambda n: self.politeness.count_drop(THROTTLED, n),
        )

    def _done(
        self, host: str, released: Released, *, ip: str = "", token: str = "", delay: float = 0.0
    ) -> None:
        self.politeness.count_drop(NOCONNECTION, max(0, released.dropped))
        ips = self.link.ips
        if ip and ips is not None:
            self.link.send("iplease", ips.release_call(ip, token, max(delay, released.pause)))
        if released.aside < 0:
            return
        # the host's throttling answers in a row, counted over every worker, reached the cap
        hosts = self.politeness.table.hosts
        hs = hosts.get(host)
        if not hs.set_aside:
            hs.set_aside = True
            self.stats.inc_value("larbin/host/set_aside")
            logger.warning(
                "Setting %s aside: it answered throttling %d times in a row, counted "
                "over every worker (LARBIN_THROTTLE_IN_A_ROW_MAX)",
                host,
                hosts.max_in_a_row,
            )
        self.politeness.count_drop(THROTTLED, released.aside)
