"""``RedisScheduler``: the local scheduler's frontier shared by many workers through Redis.

    SCRAPY_SETTINGS_MODULE=settings.distributed scrapy crawl larbin -s REDIS_URL=redis://...

The frontier (tiers, wait lists, per-site caps, per-IP readiness, leases) is ``RedisFrontier``,
one per shard (``sharded.py``); this class is its Scrapy side:

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet import defer

from larbinscrapy import fatal
from larbinscrapy.distributed.admits import Admits
from larbinscrapy.distributed.allworkers import AllWorkersControl
from larbinscrapy.distributed.connection import UNREACHABLE, connector
from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
from larbinscrapy.distributed.ending import Ending
from larbinscrapy.distributed.frontier import NORMAL, PRIORITY, RedisFrontier
from larbinscrapy.distributed.held import HeldLeases
from larbinscrapy.distributed.hosts import HostResolution
from larbinscrapy.distributed.jobs import RedisJobs
from larbinscrapy.distributed.link import FrontierLink
from larbinscrapy.distributed.membership import Membership
from larbinscrapy.distributed.pops import Pops
from larbinscrapy.distributed.readiness import ShardClock
from larbinscrapy.distributed.releases import Releases
from larbinscrapy.distributed.robots import SharedRobots
from larbinscrapy.distributed.seeds import IdleRule, RedisSeeds
from larbinscrapy.distributed.shards import Shards
from larbinscrapy.distributed.sitemaps import SharedSitemaps
from larbinscrapy.distributed.view import SharedView
from larbinscrapy.frontier.base import FrontierScheduler
from larbinscrapy.parse.urls import host_of, site_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from larbinscrapy.politeness.ipsites import IpTable

logger = logging.getLogger(__name__)


class RedisScheduler(FrontierScheduler):
    """Scrapy scheduler over the shared frontier (see the module docstring)."""

    PRIORITY_TIER = PRIORITY
    NORMAL_TIER = NORMAL
    REQUIRES_GATE = True  # each worker resolves and checks the hosts it is handed
    # the parts that need the politeness core, built at ``open`` (``_compose``)
    admits: Admits
    pops: Pops
    hosts: HostResolution
    releases: Releases
    sitemaps: SharedSitemaps  # one reader a site, each fetch under the IP lease
    all_workers: AllWorkersControl  # pause, resume, stop for every worker of the crawl
    member: Membership
    ending: Ending

    def __init__(
        self,
        crawler: Crawler,
        dupefilter: RedisBitmapDupeFilter,
        server: Any,
        *,
        frontier_key: str,
        seeds: RedisSeeds,
        lease_timeout: float,
        idle_before_close: float,
        keep_alive: bool,
        persist: bool,
        outage_timeout: float,
        max_per_site: int,
        loaded_sites: int,
        priority_extensions: frozenset[str],
        local_table: IpTable,
        redis_where: str = "",
        connect: Callable[[], Any] | None = None,
        shards: int = 1,
    ) -> None:
        super().__init__(
            crawler,
            dupefilter,
            max_per_site=max_per_site,
            loaded_sites=loaded_sites,
            priority_extensions=priority_extensions,
            local_table=local_table,
        )
        self.redis_where = redis_where or fatal.redis_location(server)  # for messages
        self._unreachable = False
        self.frontier_key = frontier_key
        self.seeds = seeds
        self.lease_timeout = lease_timeout
        self.idle = IdleRule(idle_before_close)
        self.keep_alive = keep_alive
        self.persist = persist
        # server: None until the Redis thread connected (a cluster)
        jobs = RedisJobs(
            server=server,
            connect=connect,
            outage_timeout=outage_timeout,
            on_outage=self._outage,
            stats=crawler.stats,
        )
        worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.link = FrontierLink(
            jobs, Shards(shards, frontier_key, dupefilter.key, dupefilter.m), worker
        )
        self.robots = SharedRobots(
            jobs,
            self.link.shards,
            worker,  # one fetch a site
            int(crawler.settings.getfloat("DOWNLOAD_TIMEOUT") * 1000),
        )
        self.view = SharedView(shards)  # what we know of the frontier's size
        self.clock = ShardClock(shards)  # when each shard may have a ready IP
        self.held = HeldLeases()  # the IP leases we hold, for their release

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedisScheduler:
        s = crawler.settings
        common = cls.frontier_settings(crawler)
        if not isinstance(common["dupefilter"], RedisBitmapDupeFilter):
            raise NotConfigured("RedisScheduler needs DUPEFILTER_CLASS = RedisBitmapDupeFilter")
        name = crawler.spidercls.name
        names = {"spider": name, "name": name}
        seeds = RedisSeeds(
            s["REDIS_START_URLS_KEY"] % names,
            s.getint("REDIS_START_URLS_BATCH_SIZE"),
            crawler.stats,
        )
        server, connect, shards = connector(s)
        return cls(
            crawler,
            server=server,
            connect=connect,
            shards=shards,
            redis_where=fatal.redacted(s.get("REDIS_URL") or ""),
            frontier_key=s["LARBIN_REDIS_FRONTIER_KEY"] % names,
            seeds=seeds,
            lease_timeout=s.getfloat("LARBIN_REDIS_LEASE_TIMEOUT"),
            idle_before_close=s.getfloat("LARBIN_REDIS_IDLE_BEFORE_CLOSE"),
            keep_alive=s.getbool("LARBIN_REDIS_KEEP_ALIVE"),
            persist=s.getbool("SCHEDULER_PERSIST"),
            outage_timeout=s.getfloat("LARBIN_REDIS_OUTAGE_TIMEOUT"),
            **common,
        )

    @property
    def jobs(self) -> RedisJobs:
        """The worker's ordered Redis thread (``jobs.py``)."""
        return self.link.jobs

    @property
    def worker(self) -> str:
        return self.link.worker

    @property
    def frontier(self) -> RedisFrontier:
        """The first shard's frontier: the whole frontier with one Redis."""
        return self.link.fs.frontiers[0]

    # -- Scrapy's scheduler contract ------------------------------------------------------
    def open(self, spider: Spider) -> defer.Deferred[None]:
        self.spider = spider
        self._connect()
        # the shared frontier waits for each host: a leased request whose host must still wait
        # (after its robots.txt) goes back to it, the IP serves other hosts meanwhile
        self.politeness.hosts_scheduled = True
        self._compose()
        self.jobs.start()
        # the send-time gate gives a lease back exactly when a request we leased ends
        self.table.add_release_listener(self.releases.released)
        self.crawler.signals.connect(self.ending.spider_idle, signal=signals.spider_idle)

        def join() -> tuple[Any, dict[str, int]]:
            self.link.build(
                self.jobs.server,
                self.table,  # connected in this thread
                seeds_key=self.seeds.key,
                max_per_site=self.max_per_site,
                loaded_sites=self.loaded_sites,
                lease_timeout=self.lease_timeout,
            )
            return self.member.heartbeat_job(), self.link.fs.status()

        # Not submit: a failure here must fail the start (Scrapy awaits this Deferred).
        d = self.jobs.run(join)
        d.addCallbacks(self._joined, self._join_failed)
        return d

    def _compose(self) -> None:
        """The parts that need the politeness core (found at ``open``), each handed what it
        uses."""
        link, politeness, stats = self.link, self.politeness, self.stats
        wake, wake_in = self._wake_engine, self._wake_in
        self.admits = Admits(
            link, view=self.view, clock=self.clock, df=self.df, stats=stats, wake=wake
        )
        self.hosts = HostResolution(
            link,
            politeness=politeness,
            admits=self.admits,
            clock=self.clock,
            stats=stats,
            wake=wake,
        )
        self.pops = Pops(
            link,
            view=self.view,
            clock=self.clock,
            held=self.held,
            hosts=self.hosts,
            politeness=politeness,
            stats=stats,
            hand_out=self._hand_out,
            wake=wake,
            wake_in=wake_in,
        )
        self.releases = Releases(
            link, held=self.held, clock=self.clock, politeness=politeness, stats=stats
        )
        self.sitemaps = SharedSitemaps(link, held=self.held, politeness=politeness)
        self._compose_membership()

    def _compose_membership(self) -> None:
        """The worker's life in the shared frontier: heartbeat and seeds, the commands for
        every worker, and its ending."""
        link, stats = self.link, self.stats
        wake, wake_in, now = self._wake_engine, self._wake_in, self.table.clock
        self.all_workers = AllWorkersControl(
            link,
            f"{link.shards.prefix(0)}:control",
            f"the queue stays in Redis (frontier {self.frontier_key} at {self.redis_where}), "
            f"what this worker leased goes back to it: start workers again with the same "
            f"REDIS_URL and LARBIN_REDIS_FRONTIER_KEY to go on",
            self.crawler.signals.send_catch_log,
        )
        self.member = Membership(
            link,
            lease_timeout=self.lease_timeout,
            seeds=self.seeds,
            admits=self.admits,
            pops=self.pops,
            hosts=self.hosts,
            view=self.view,
            clock=self.clock,
            control=self.all_workers,
            stats=stats,
            now=now,
            engine=self._engine,
            wake=wake,
        )
        self.ending = Ending(
            self.idle,
            keep_alive=self.keep_alive,
            jobs=link.jobs,
            admits=self.admits,
            pops=self.pops,
            hosts=self.hosts,
            view=self.view,
            now=now,
            wake_in=wake_in,
        )

    def _join_failed(self, failure: Failure) -> None:
        """Redis is not there: one line naming it, and the crawl ends (``fatal``), exit 1."""
        failure.trap(*UNREACHABLE)
        self._gone()
        fatal.stop(
            self.crawler,
            fatal.REDIS_UNREACHABLE,
            f"cannot reach Redis at {self.redis_where}: {failure.getErrorMessage()}",
        )

    def _outage(self, detail: str) -> None:
        """Redis stayed away (``RedisJobs``): stop, one line; its state waits in Redis."""
        self._gone()
        fatal.stop(
            self.crawler,
            fatal.REDIS_UNREACHABLE,
            f"Redis at {self.redis_where} {detail}: stopping this worker; what it had "
            f"leased goes back to the queue in Redis (LARBIN_REDIS_LEASE_TIMEOUT)",
        )

    def _gone(self) -> None:
        self._unreachable = True
        self.link.stop()

    def _joined(self, result: tuple[Any, dict[str, int]]) -> None:
        beat, status = result
        self.member.heartbeat_done(beat, joining=True)
        self.view.joined(status["queued"], status)
        count = self.link.shards.count
        logger.info(
            "Worker %s joined frontier %s (%d shard%s): %d queued, %d leased, %d seeds waiting",
            self.worker,
            self.frontier_key,
            count,
            "s" * (count > 1),
            status["queued"],
            status["leased"],
            status["seeds"],
        )
        self.member.start(self.spider)

    def close(self, reason: str) -> defer.Deferred[None]:
        """Queue the last admit and the retirement behind the jobs in flight; Scrapy awaits."""
        self.link.stop()
        self.member.close()
        self.admits.close()
        self.pops.close()
        self._cancel_wakeup()
        if self._unreachable:  # never joined, or Redis went away: no Redis to tell
            self.jobs.stop()
            return defer.succeed(None)
        self._settle_items()  # pages whose items are stored: acknowledged, not handed back
        self.admits.flush(now=True)  # behind the admit in flight, before the retirement
        fs, worker, df = self.link.fs, self.worker, self.df

        def retire() -> tuple[int, dict[str, int], int | None]:
            requeued = fs.retire(worker)
            status = fs.status()
            bits = fs.bits_set(df.m) if df.stats is not None else None
            if reason == "finished" and not self.persist and not status["workers"]:
                fs.delete()
            return requeued, status, bits

        d = self.jobs.submit_awaited("close", retire, then=self._retired)
        d.addBoth(lambda _: self.jobs.stop())
        return d

    def _retired(self, result: tuple[int, dict[str, int], int | None]) -> None:
        requeued, status, bits = result
        if requeued:
            logger.info("Handed %d unacknowledged requests back to the frontier", requeued)
        self.stats.set_value("larbin/frontier/left_queued", status["queued"])
        if bits is not None:
            self.df.report_bits(bits)

    def has_pending_requests(self) -> bool:
        admits = self.admits
        return bool(
            self.pops.ready
            or self.memory_only
            or admits.buffered
            or self.view.queued > 0
            or self.pops.popping
            or admits.admitting
        )

    def __len__(self) -> int:
        return self._in_memory() + self.view.queued

    def _in_memory(self) -> int:
        return len(self.pops.ready) + len(self.memory_only) + self.admits.buffered

    def _enqueue(self, request: Request, previous: Any, *, seen_test: bool) -> bool:
        record = self._encode(request)
        if record is not None:
            url = request.url
            host = host_of(url)
            self.politeness.prefetch(host)  # DNS ahead of the host's turn, as the local frontier
            shard, frontier = self.link.frontier_of(host)
            positions = (
                self.link.shards.positions(self.df.request_positions(request)) if seen_test else []
            )
            entry = frontier.entry(site_of(url), host, record)
            self.admits.add(shard, (self._tier(request), positions, entry))
        if previous is not None:
            self.admits.ack(previous)
        elif self.admits.full():
            self.admits.flush()
        return True

    def next_request(self) -> Request | None:
        if self.memory_only:
            return self.memory_only.popleft()
        ready = self.pops.ready
        if not ready:
            self.admits.flush()
            self.pops.pop()
        if ready:
            self.stats.inc_value("larbin/frontier/dequeued")
            return ready.popleft()
        return None

    def flush(self, now: bool = False) -> None:
        """Admit the buffered requests now (``Admits.flush``)."""
        self.admits.flush(now)

    def host_set_aside(self, host: str) -> None:
        """``host`` asked for a pause past the cap: no worker asks it again (its records go)."""
        self.releases.set_aside(host)

    def _page_complete(self, lease: Any) -> None:
        """Every child of the page is in the buffer: admit them and ack the page in one script."""
        self.admits.ack(lease)

    def status(self) -> dict[str, Any]:
        """For the status page (``larbinscrapy/status/``): the shared frontier's sizes (last
        read from Redis; asks the next tick for fresh ones) and this worker's own buffers
        and IPs."""
        self.view.want()
        return {
            "queued": len(self),
            "shared": self.view.summary(),
            "in_memory": self._in_memory(),
            "sites": {"resolving": len(self.hosts.resolving)},
            "ips": self.ip_summary(),
        }
