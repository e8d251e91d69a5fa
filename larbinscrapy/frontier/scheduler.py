"""``LarbinScheduler``: larbin's frontier as a Scrapy scheduler (``SCHEDULER``), crash-safe in
``JOBDIR/frontier/`` (docs/modules.md, "The frontier")."""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twisted.internet import task

from larbinscrapy import fatal
from larbinscrapy import meta as M
from larbinscrapy.frontier import codec
from larbinscrapy.frontier.base import FrontierScheduler
from larbinscrapy.frontier.diskguard import writes
from larbinscrapy.frontier.dnsfailed import DnsFailedLog
from larbinscrapy.frontier.fifos import (
    FIFO_LABELS,
    FIFO_NAMES,
    NORMAL,
    NORMAL_WAIT,
    PRIORITY,
    PRIORITY_WAIT,
    adopt_legacy_wait,
    settle_tails,
)
from larbinscrapy.frontier.fifos import FLUSH_ORDER as _FLUSH_ORDER
from larbinscrapy.frontier.fifos import MOVED as _MOVED
from larbinscrapy.frontier.fifos import SOURCE_OF as _SOURCE_OF
from larbinscrapy.frontier.fifos import WAIT_OF as _WAIT_OF
from larbinscrapy.frontier.segments import SegmentFifo
from larbinscrapy.frontier.sites import DEAD, READY, IpRing, Overflow, Site
from larbinscrapy.parse.urls import host_of, site_of
from larbinscrapy.politeness.ipsites import DNS, NOCONNECTION, IpTable
from larbinscrapy.seen import SavedSeenSet
from larbinscrapy.seen.dupefilter import SnapshotError

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from larbinscrapy.politeness.ipsites import IpState

logger = logging.getLogger(__name__)


_MOVED_BATCH = 4096  # moves whose acks wait for a flush at most (a long refill flushes early)
_NO_SOURCE = _MOVED.pack(0xFFFF_FFFF_FFFF_FFFF)  # a wait record written there first: no copy


class LarbinScheduler(FrontierScheduler):
    """Two-tier disk frontier with per-site queues and per-IP round robin (see module doc)."""

    PRIORITY_TIER = PRIORITY
    NORMAL_TIER = NORMAL
    _leased: dict[tuple[int, int], Site]  # handed out, not acked: their site (from open())

    def __init__(
        self,
        crawler: Crawler,
        dupefilter: BaseDupeFilter,
        *,
        jobdir: str | None,
        max_per_site: int,
        segment_records: int,
        priority_extensions: frozenset[str],
        flush_interval: float,
        loaded_sites: int,
        local_table: IpTable,
    ) -> None:
        super().__init__(
            crawler,
            dupefilter,
            max_per_site=max_per_site,
            loaded_sites=loaded_sites,
            priority_extensions=priority_extensions,
            local_table=local_table,
        )
        self.jobdir = jobdir
        self.segment_records = segment_records
        self.flush_interval = flush_interval
        self.mem_limit = max(1, loaded_sites) * max_per_site
        self.fifos: list[SegmentFifo] = []
        self.sites: dict[str, Site] = {}
        self.dead_hosts: dict[str, str] = {}  # host -> reason, so later URLs drop at once
        self.in_memory = 0  # records held in site queues
        self._moved: list[tuple[int, int]] = []  # main records moved to wait, ack not written
        self._moves = 0  # records moved to a wait FIFO (larbin/frontier/to_wait)
        self._dir: Path | None = None
        self._tempdir = False
        self._loop: task.LoopingCall | None = None
        self.disk_error: BaseException | None = None  # set once a frontier file failed
        self.closed = False
        self._refill_turn = 0
        self.ring: IpRing
        # the URLs dropped for DNS, for -a retry=dns (frontier/dnsfailed.py); JOBDIR only
        self.dns_failed = DnsFailedLog(jobdir) if jobdir else None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LarbinScheduler:
        s = crawler.settings
        return cls(
            crawler,
            jobdir=s.get("JOBDIR") or None,
            segment_records=s.getint("LARBIN_FRONTIER_SEGMENT_URLS"),
            flush_interval=s.getfloat("LARBIN_FRONTIER_CHECKPOINT_INTERVAL"),
            **cls.frontier_settings(crawler),
        )

    # -- Scrapy's scheduler contract ------------------------------------------------------
    def open(self, spider: Spider) -> Deferred[None] | None:
        self.spider = spider
        self._connect()
        self.politeness.hosts_scheduled = True  # the ring waits for each site's host
        self.ring = IpRing(self.table, self.crawler.settings.getfloat("DOWNLOAD_DELAY"))
        self._leased = {}
        self.table.add_listener(self._ip_changed)
        if self.jobdir:
            self._dir = Path(self.jobdir, "frontier")
        else:
            self._dir = Path(tempfile.mkdtemp(prefix="larbin-frontier-"))
            self._tempdir = True
        try:
            recent = self._open_fifos(self._dir)
            opened = self.df.open()
            self._mark_seen(recent)
        except (OSError, ValueError, RuntimeError, SnapshotError) as exc:  # full, damaged, in use
            for fifo in self.fifos:  # the ones that opened: back as they were (an empty one
                with contextlib.suppress(OSError):  # it created goes away again)
                    fifo.close()
            self._disk_failed(exc)  # the crawl closes at once; nothing more is written
            return None
        if self.jobdir:
            self._loop = task.LoopingCall(self.flush)
            self._loop.start(self.flush_interval, now=False)
        return opened

    def _open_fifos(self, directory: Path) -> list[bytes]:
        """Open (and repair) the four FIFOs; return the records queued since their last
        checkpoint (``settle_tails``)."""
        self.df.on_disk_error = self._disk_failed
        for name in FIFO_NAMES:
            self.fifos.append(SegmentFifo(directory / name, self.segment_records))
        assert self._dir is not None
        adopt_legacy_wait(self._dir, self.fifos, self.segment_records)
        for name, fifo in zip(FIFO_NAMES, self.fifos, strict=True):
            if fifo.corrupt_records:
                self.stats.inc_value("larbin/frontier/corrupt_records", fifo.corrupt_records)
            if len(fifo):
                logger.info("Resuming %d queued URLs from %s", len(fifo), name)
        recent = settle_tails(self.fifos, self.stats)
        if isinstance(self.df, SavedSeenSet):  # its bits never reach the disk before records
            self.df.write_after(self._flush_records)
        return recent

    def _mark_seen(self, records: list[bytes]) -> None:
        """A queued URL is a seen URL: a ``kill -9`` between a record's write and its bit's
        leaves the bit off the disk, and the page that found the URL, not acknowledged, comes
        back and would queue it again."""
        for record in records:
            try:
                request = codec.decode(record, self.spider, self._request_cls)
            except Exception:  # a user's callback or class gone: fails at its turn, as before
                continue
            request.meta.pop(M.ADMITTED, None)  # the dupefilter's own test, which marks
            self.df.request_seen(request)
        if records:
            logger.debug("Marked seen the %d URLs queued since the last checkpoint", len(records))

    def _disk_failed(self, exc: BaseException) -> None:
        """The frontier's files cannot be written or read: stop writing, stop the crawl.

        Nothing more is written, in particular no dupefilter bit after a frontier record
        that failed to reach the disk (``df.abandon``): on resume, what the files hold is read
        back as after a ``kill -9``.
        """
        if self.disk_error is not None:
            return
        self.disk_error = exc
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if isinstance(self.df, SavedSeenSet):
            self.df.abandon()
        where = self.jobdir or "the frontier's temporary directory"
        fatal.stop(self.crawler, fatal.JOBDIR_ERROR, f"job directory {where}: {exc}")

    def close(self, reason: str) -> Deferred[None] | None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._cancel_wakeup()
        if self.disk_error is not None:  # stopped writing: leave the files as they are
            self.closed = True
            return None
        self._settle_items()  # the pages whose items are stored: acknowledged before the end
        self._flush_all()  # moved records, then their acks
        for index in _FLUSH_ORDER:  # records before acks, then the dupefilter's bits
            self.fifos[index].close()
        self.df_flush()
        if self.dns_failed is not None:
            self.dns_failed.close()
        if self._tempdir and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        elif self._dir is not None:
            with contextlib.suppress(OSError):  # only when every FIFO removed its files
                self._dir.rmdir()
        self.stats.set_value("larbin/frontier/left_queued", len(self))
        self.closed = True  # answers still in flight (DNS) change nothing from now on
        return self.df.close(reason)

    def has_pending_requests(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        return sum(len(f) for f in self.fifos) + self.in_memory + len(self.memory_only)

    @writes(False)
    def _enqueue(self, request: Request, previous: Any, *, seen_test: bool) -> bool:
        if seen_test and self.df.request_seen(request):
            self.df.log(request, self.spider)
            self._ack(previous)
            return False
        record = self._encode(request)
        if record is not None:
            tier = self._tier(request)
            self.stats.inc_value("larbin/frontier/enqueued")
            if tier == NORMAL and self._place_warm(request.url, record):
                self._ack(previous)
                return True
            self.fifos[tier].push(record)
            # DNS once per site, when its first URL is admitted, not when its turn comes
            self.politeness.prefetch(host_of(request.url))
            if tier == PRIORITY and self.in_memory < self.mem_limit:
                self._place_priority()
        self._ack(previous)
        return True

    def _place_warm(self, url: str, record: bytes) -> bool:
        """Queue a URL of a site in memory (being fetched, or with URLs queued) in its site's
        queue now, not behind every URL on disk (larbin: a known site's URLs go to its queue,
        only the overflow to the wait FIFO): its pages go one after another at the site's
        delay, over the connection its last page left open. Written once, to the wait FIFO
        (read in order only after a restart), leased from there; False: queue it as before.
        """
        site = self.sites.get(site_of(url))
        if site is None or site.state == DEAD or self.in_memory >= self.mem_limit:
            return False
        if len(self.fifos[PRIORITY]):  # the priority tier's URLs go into memory first
            return False
        crowded = site.overflow is not None or len(site.queue) >= self.max_per_site
        if crowded and not site.queue:
            return False
        wait = self.fifos[NORMAL_WAIT]
        rid = wait.push(_NO_SOURCE + record)
        if crowded:
            if site.overflow is None:
                site.overflow = Overflow()
            site.overflow.append(NORMAL_WAIT, rid, wait.last_offset)
            self.stats.inc_value("larbin/frontier/to_wait")
            return True
        wait.lease(rid)
        site.queue.append((NORMAL_WAIT, rid, record))
        self.in_memory += 1
        if site.state == READY and len(site.queue) == 1:
            self.ring.add_site(site)
            self._wake_engine()
        return True

    def _place_priority(self) -> None:
        """Move the priority tier's next record into its site's queue now, at the front: an
        injected URL is its site's next fetch, not behind the site's loaded queue."""
        fifo = self.fifos[PRIORITY]
        popped = fifo.pop()
        if popped is not None:
            self._place_record(PRIORITY, popped[0], popped[1], fifo.last_offset)
            self._wake_engine()

    @writes(None)
    def next_request(self) -> Request | None:
        if self.memory_only:
            return self.memory_only.popleft()
        now = self.table.clock()
        picked = self.ring.next_ready(now)
        if picked is None and self.in_memory < self.mem_limit:
            self._refill(now)
            picked = self.ring.next_ready(now)
        if picked is None:
            self._schedule_wakeup()
            return None
        st, site = picked
        site.due = -1.0  # served: its warm entry, if any, is stale (set again when it ends)
        fifo_index, rid, record = site.queue.pop(0)
        if site.head:
            site.head -= 1
        self.in_memory -= 1
        if site.overflow is not None:
            self._top_up(site)
        if not site.queue:  # kept while its page is out: its links come back to it (_place_warm)
            self.ring.site_emptied(site)
        site.out += 1
        self._leased[(fifo_index, rid)] = site
        self.ring.serving[site.host] = site
        self.table.acquire(st)
        self.ring.place(st.ip)
        self.stats.inc_value("larbin/frontier/dequeued")
        return self._hand_out(record, (fifo_index, rid), st.ip)

    # -- the sequencer: disk tiers -> site queues ------------------------------------------
    def _refill(self, now: float, budget: int = 256) -> None:
        """Move up to ``budget`` records from disk into site queues, priority tier first.

        A wait FIFO is read in order only for what an earlier run left there (its records of
        this run are read back by id, per site); every fourth call starts with those.
        """
        self._refill_turn += 1
        order = (
            (PRIORITY, PRIORITY_WAIT, NORMAL, NORMAL_WAIT)
            if self._refill_turn % 4
            else (PRIORITY_WAIT, PRIORITY, NORMAL_WAIT, NORMAL)
        )
        moved = self._moves
        for index in order:
            fifo = self.fifos[index]
            before = fifo.resumed_end if index in _SOURCE_OF else None
            while budget > 0 and self.in_memory < self.mem_limit:
                popped = fifo.pop(before)
                if popped is None:
                    break
                budget -= 1
                self._place_record(index, popped[0], popped[1], fifo.last_offset)
        if self._moves != moved:  # counted once a call: a stats call costs more than a move
            self.stats.inc_value("larbin/frontier/to_wait", self._moves - moved)

    def _place_record(self, index: int, rid: int, record: bytes, offset: int) -> None:
        payload = record[_MOVED.size :] if index in _SOURCE_OF else record
        url = codec.url_of(payload)
        host = host_of(url)
        dead = self.dead_hosts.get(host)
        if dead is not None:
            self._drop_dead(index, rid, url, dead)
            return
        key = site_of(url)
        site = self.sites.get(key)
        if site is None:
            site = self.sites[key] = Site(key, host)
            self._resolve(site)
        if site.state == DEAD:  # refused synchronously (the SSRF guard, a cached DNS failure)
            self._drop_dead(index, rid, url, self.dead_hosts[host])
            return
        if index == PRIORITY and site.head < self.max_per_site:  # ahead of the site's others
            site.queue.insert(site.head, (index, rid, payload))
            site.head += 1
            self.in_memory += 1
            if site.state == READY:  # served as a started site (``IpRing.add_site``)
                self.ring.add_site(site)
            return
        if len(site.queue) >= self.max_per_site or site.overflow is not None:
            self._overflow(site, index, rid, record, offset)
            return
        site.queue.append((index, rid, payload))
        self.in_memory += 1
        if site.state == READY and len(site.queue) == 1:
            self.ring.add_site(site)

    def _overflow(self, site: Site, index: int, rid: int, record: bytes, offset: int) -> None:
        """Keep a full site's record on disk and its place in the site's overflow."""
        if site.overflow is None:
            site.overflow = Overflow()
        if index in _SOURCE_OF:  # an earlier run's wait record: it stays where it is
            self.fifos[index].release(rid)
            site.overflow.append(index, rid, offset)
            return
        wait = self.fifos[_WAIT_OF[index]]
        wait_rid = wait.push(_MOVED.pack(rid) + record)
        site.overflow.append(_WAIT_OF[index], wait_rid, wait.last_offset)
        if self.jobdir:
            self._moved.append((index, rid))  # acked once the moved copy is flushed
            if len(self._moved) >= _MOVED_BATCH:
                self._flush_all()
        else:
            self.fifos[index].ack(rid)
        self._moves += 1

    def _top_up(self, site: Site) -> None:
        """Refill a site's queue from its overflow: records read back by id, never rewritten."""
        overflow = site.overflow
        assert overflow is not None
        read = 0
        while overflow and len(site.queue) < self.max_per_site:
            index, rid, offset = overflow.popleft()
            record = self.fifos[index].read_at(rid, offset)
            if record is None:
                self.stats.inc_value("larbin/frontier/corrupt_records")
                continue
            site.queue.append((index, rid, record[_MOVED.size :]))
            read += 1
        self.in_memory += read
        self.stats.inc_value("larbin/frontier/from_wait", read)
        if not overflow:
            site.overflow = None

    def _resolve(self, site: Site) -> None:
        d = self.politeness.resolve(site.host)
        d.addCallbacks(self._resolved, self._unresolved, callbackArgs=(site,), errbackArgs=(site,))

    def _resolved(self, ip: str, site: Site) -> None:
        if self.closed:  # the resumed crawl asks again: the URLs are still queued on disk
            return
        site.ip = ip
        site.state = READY
        if site.queue:
            self.ring.add_site(site)
            self._wake_engine()

    def _unresolved(self, failure: Failure, site: Site) -> None:
        # any failure: a site left RESOLVING would keep the crawl open forever
        if self.closed:  # its files are closed: the resumed crawl asks again
            return
        reason = self.politeness.host_dropped(site.host, failure)
        self.dead_hosts[site.host] = reason
        if reason == DNS and self.dns_failed is not None:  # kept before their records go
            self.dns_failed.add([codec.url_of(payload) for _, _, payload in site.queue])
        self._drop_site(site, reason)

    @writes(None)
    def _drop_site(self, site: Site, reason: str) -> None:
        site.state = DEAD
        self.sites.pop(site.key, None)
        if self.ring.serving.get(site.host) is site:
            del self.ring.serving[site.host]
        for index, rid, _ in site.queue:
            self._drop(index, rid, reason)
        self.in_memory -= len(site.queue)
        site.queue.clear()
        site.head = 0
        if site.overflow is not None:
            for index, rid, _ in site.overflow:
                self.fifos[index].discard(rid)
            self.politeness.count_drop(reason, len(site.overflow))
            site.overflow = None

    def _drop_dead(self, index: int, rid: int, url: str, reason: str) -> None:
        if reason == DNS and self.dns_failed is not None:  # kept before its record goes
            self.dns_failed.add([url])
        self._drop(index, rid, reason)

    def _drop(self, index: int, rid: int, reason: str) -> None:
        self.fifos[index].ack(rid)
        self.politeness.count_drop(reason)

    # -- leases and acknowledgements -------------------------------------------------------
    @writes(None)
    def _page_complete(self, rid: Any) -> None:
        self._ack(rid)

    def _ack(self, *rids: tuple[int, int] | None) -> None:
        """Record that handed-out requests are finished, after what they produced is on disk."""
        acked = [rid for rid in rids if rid is not None]
        if not acked:
            return
        if self.jobdir:
            self._flush_all()
        for index, record_id in acked:
            self.fifos[index].ack(record_id)
            site = self._leased.pop((index, record_id), None)
            if site is not None:
                self._returned(site)
        if self.jobdir:
            for index in {index for index, _ in acked}:
                self.fifos[index].flush()

    def _returned(self, site: Site) -> None:
        """A page of ``site`` is acknowledged: forget the site once nothing of it is left."""
        site.out -= 1
        gone = not site.out and not site.queue and site.overflow is None
        if gone and self.sites.get(site.key) is site:
            del self.sites[site.key]
            if self.ring.serving.get(site.host) is site:
                del self.ring.serving[site.host]

    def _flush_all(self) -> None:
        """Hand buffered writes to the OS in the order a ``kill -9`` needs.

        Records pushed to a wait FIFO before the acks of the records they were moved from
        (``_FLUSH_ORDER``), and every record before the dupefilter bits of its URL: a bit on
        disk without its record would lose the URL for good, the reverse only fetches it twice.
        """
        self._flush_records()
        self.df_flush()

    def _flush_records(self) -> None:
        """The FIFOs' buffered records and acks to the OS, in ``_FLUSH_ORDER``; also what the
        dupefilter's own clock runs before it writes (``write_after``)."""
        for index in _FLUSH_ORDER:
            if index == PRIORITY and self._moved:  # the wait FIFOs are flushed: now the acks
                for source, rid in self._moved:
                    self.fifos[source].ack(rid)
                self._moved.clear()
            self.fifos[index].flush()

    def df_flush(self) -> None:
        if isinstance(self.df, SavedSeenSet):
            self.df.flush()

    @writes(None)
    def flush(self) -> None:
        """Periodic: hand buffered frontier and dupefilter writes to the OS; checkpoint."""
        self._flush_all()
        for index in _FLUSH_ORDER:
            self.fifos[index].checkpoint()

    # -- IP readiness and waking the engine ------------------------------------------------
    @writes(None)
    def _ip_changed(self, st: IpState) -> None:
        if st.dead:  # its sites in the ring, and those with a page out (not in the ring)
            out = [site for site in self._leased.values() if site.ip == st.ip]
            for site in (*self.ring.dead_ip_sites(st.ip), *out):
                if site.state != DEAD:
                    self.dead_hosts[site.host] = NOCONNECTION
                    self._drop_site(site, NOCONNECTION)
            return
        if st.last_host is not None:  # a fetch of it may have ended: its site goes next
            self.ring.released(st, st.last_host)
        self.ring.place(st.ip)
        self._schedule_wakeup()

    def _schedule_wakeup(self) -> None:
        """Wake the engine when the next IP cools down."""
        when = self.ring.next_wakeup()
        if when is not None:
            self._wake_in(when - self.table.clock())

    # -- read-only view for the status page (larbinscrapy/status/) ---------------------------
    def _seen_status(self) -> dict[str, float | None]:
        """The seen-set's fill for the status page (None for a dupefilter without bits)."""
        df = self.df if isinstance(self.df, SavedSeenSet) else None
        return {
            "fill_ratio": None if df is None else df.fill_ratio,
            "estimated_fp_rate": None if df is None else df.estimated_fp_rate,
        }

    def status(self) -> dict[str, Any]:
        """Queue sizes per FIFO, sites in memory, IPs by state, the seen-set's fill."""
        resolving = sum(1 for site in self.sites.values() if site.state != READY)
        return {
            "queued": len(self),
            # not strict: after an open that failed (jobdir_error) only some FIFOs exist
            "fifos": {name: len(fifo) for name, fifo in zip(FIFO_LABELS, self.fifos)},  # noqa: B905
            "in_memory": self.in_memory + len(self.memory_only),
            "sites": {
                "in_memory": len(self.sites),
                "resolving": resolving,
                "dead": len(self.dead_hosts),
            },
            "ips": self.ip_summary(),
            "seen": self._seen_status(),
        }
