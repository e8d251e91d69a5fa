"""When a worker of the shared frontier may close (``spider_idle``).

The engine is idle: the worker decides on the frontier's status the tick read (``SharedView``),
and only if it was read after the last admit and the last pop that leased something and no job
is in flight; otherwise ``DontCloseSpider``, and the next tick reads a fresh status. The rule
itself (empty for ``LARBIN_REDIS_IDLE_BEFORE_CLOSE`` s, nothing being resolved) is ``IdleRule``;
``LARBIN_REDIS_KEEP_ALIVE`` keeps the worker waiting for work forever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import DontCloseSpider

from larbinscrapy.distributed.link import POLL

if TYPE_CHECKING:
    from collections.abc import Callable

    from larbinscrapy.distributed.admits import Admits
    from larbinscrapy.distributed.hosts import HostResolution
    from larbinscrapy.distributed.jobs import RedisJobs
    from larbinscrapy.distributed.pops import Pops
    from larbinscrapy.distributed.seeds import IdleRule
    from larbinscrapy.distributed.view import SharedView


class Ending:
    """Decides ``spider_idle`` for one worker (module docstring)."""

    def __init__(
        self,
        rule: IdleRule,
        *,
        keep_alive: bool,
        jobs: RedisJobs,
        admits: Admits,
        pops: Pops,
        hosts: HostResolution,
        view: SharedView,
        now: Callable[[], float],
        wake_in: Callable[[float], None],
    ) -> None:
        self.rule = rule
        self.keep_alive = keep_alive
        self.jobs = jobs
        self.admits = admits
        self.pops = pops
        self.hosts = hosts
        self.view = view
        self.now = now
        self.wake_in = wake_in

    def spider_idle(self) -> None:
        """Decides on the status the tick read, if it is newer than our last change."""
        self.admits.flush()
        if self.keep_alive:
            raise DontCloseSpider
        self.view.want()  # for this decision or the next one
        status = self.view.fresh()
        if status is None or self.jobs.in_flight or self.pops.popping:
            self.wake_in(POLL)  # the next tick reads a fresh status
            raise DontCloseSpider
        verdict = self.rule.may_close(status, bool(self.hosts.resolving), self.now())
        if verdict is None:
            self.wake_in(POLL)
        if not verdict:
            raise DontCloseSpider
