"""Sitemaps in the Redis frontier: a site's sitemaps read by one worker, each fetch under the
IP's shared lease (a part of ``RedisScheduler``).

``claim`` takes ``<shard prefix>:sitemaps:<site>`` (``SET NX``, kept with the frontier): the
worker that gets it reads the site's sitemaps, the others leave them. A worker killed while
reading leaves the rest of that site's sitemap unread (its pages are still reached by links).
``take_ip`` leases a connection on the sitemap's IP as a pop does (``TAKE``; in a cluster the
IP's own lease too, ``iplease.py``), waiting while the IP is busy or cooling; the request
carries it as ``M.LEASE`` and gives it back through the same release as a page.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future

from larbinscrapy.distributed.jobs import Call, later
from larbinscrapy.distributed.link import POLL
from larbinscrapy.parse.urls import host_of

if TYPE_CHECKING:
    from larbinscrapy.distributed.held import HeldLeases
    from larbinscrapy.distributed.link import FrontierLink
    from larbinscrapy.politeness import HostRegistry

logger = logging.getLogger(__name__)


class SharedSitemaps:
    """Who reads a site's sitemaps, and the IP lease of each fetch (module docstring)."""

    def __init__(self, link: FrontierLink, *, held: HeldLeases, politeness: HostRegistry) -> None:
        self.link = link
        self.held = held
        self.politeness = politeness
        self.taken = 0  # sitemap fetches leased so far (their record ids)

    async def claim(self, site: str) -> bool:
        """True when this worker reads ``site``'s sitemaps (no other worker took them)."""
        link = self.link
        key = f"{link.shards.prefix(link.shards.of(host_of(site)))}:sitemaps:{site}"
        reply = await maybe_deferred_to_future(
            link.jobs.submit_awaited("sitemap claim", Call(("SET", key, link.worker, "NX")))
        )
        return reply is not None

    async def take_ip(self, url: str) -> str:
        """The IP of ``url``'s host, with one of its connections leased to this worker; raises
        ``DroppedRequest`` when the host gate refuses the host."""
        link = self.link
        host = host_of(url)
        ip: str = await maybe_deferred_to_future(self.politeness.resolve(host))
        shard, frontier = link.frontier_of(host)
        while True:
            wait = await maybe_deferred_to_future(
                link.jobs.submit_awaited("sitemap lease", frontier.take_call(link.worker, ip, host))
            )
            if wait == 0:
                self.taken += 1
                rid = f"sitemap{self.taken}"
                if link.ips is not None:  # a cluster: the IP's own lease too
                    other = await maybe_deferred_to_future(
                        link.jobs.submit_awaited(
                            "iplease", link.ips.acquire_call(ip, link.token(rid))
                        )
                    )
                    if other != 0:
                        link.send("release", frontier.release_call(link.worker, ip, 0.0, host=host))
                        await maybe_deferred_to_future(later(min(POLL, other or POLL)))
                        continue
                self.held.hold(ip, shard, rid)
                table = self.politeness.table
                table.acquire(table.get(ip))
                return ip
            await maybe_deferred_to_future(
                later(POLL if wait is None or wait < 0 else min(POLL, wait / 1000))
            )
