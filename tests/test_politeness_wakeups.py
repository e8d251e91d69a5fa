"""A request held at its IP wakes when it may go, not on a poll (issue 35, point 6: CPU a page).

A request whose IP has every connection in use waited with a 50 ms timer of its own: on the
simulated internet (shared addresses, tarpits holding an IP's one connection until the
timeout) the crawl woke 20 times a second per held request while nothing was due. The IP's
listener wakes the first waiter that may start when a connection is given back; the timer is
left only to see a stop (``stopping.POLL``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from scrapy import Request
from scrapy.utils.test import get_crawler

from larbinscrapy import meta as M
from larbinscrapy.middlewares import politeness as mw_module
from larbinscrapy.middlewares.politeness import PolitenessMiddleware
from tests.support.crawl import LARBIN_DEFAULTS

IP = "127.43.0.1"  # nothing is sent: the middleware only decides when a request may go


def _middleware() -> PolitenessMiddleware:
    crawler = get_crawler(
        settings_dict={
            **LARBIN_DEFAULTS,
            "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8",
            "LARBIN_IP_DELAY": 0,
            "DOWNLOAD_DELAY": 0,
        }
    )
    return PolitenessMiddleware.from_crawler(crawler)


def _hold(mw: PolitenessMiddleware, url: str) -> tuple[Request, asyncio.Task[Any]]:
    request = Request(url, meta={M.IP: IP})
    held = mw.process_request(request)
    assert asyncio.iscoroutine(held), "the IP's connection is in use: the request must wait"
    return request, asyncio.get_event_loop().create_task(held)


def _count_checks(mw: PolitenessMiddleware) -> list[int]:
    """Every look a held request takes at its IP (``_ready_in``): one per wake-up."""
    checks = [0]
    ready_in = mw._ready_in

    def counting(*args: Any, **kwargs: Any) -> float | None:
        checks[0] += 1
        return ready_in(*args, **kwargs)

    mw._ready_in = counting  # type: ignore[method-assign]
    return checks


def test_a_request_waiting_for_its_ips_connection_does_not_poll():
    mw = _middleware()
    st = mw.table.get(IP)
    mw.table.acquire(st)  # the IP's one connection is out (a tarpit, a slow page...)
    request, task = _hold(mw, "http://a.test/page")
    checks = _count_checks(mw)
    loop = asyncio.get_event_loop()
    loop.run_until_complete(asyncio.sleep(1.0))
    assert not task.done()
    # before: a look every 50 ms (~20 in this second); now the stop check's POLL (0.5 s)
    assert checks[0] <= 3, f"{checks[0]} wake-ups in 1 s while nothing was due"
    mw.table.finish(st, release=True, failed=False)  # the connection is given back
    loop.run_until_complete(asyncio.wait_for(task, 5))
    assert request.meta.get(M.SENT)
    assert st.busy == 1  # it took the connection


def test_a_given_back_connection_goes_to_the_first_waiter_that_may_use_it(monkeypatch):
    # the first waiter's host is busy elsewhere: the connection must go to the second one at
    # once, not when a timer of its own comes (here never: POLL set to a minute)
    monkeypatch.setattr(mw_module, "POLL", 60.0)
    mw = _middleware()
    st = mw.table.get(IP)
    mw.table.acquire(st)
    busy_host = mw.hosts.get("a.test")
    first, first_task = _hold(mw, "http://a.test/page")
    second, second_task = _hold(mw, "http://b.test/page")
    loop = asyncio.get_event_loop()
    loop.run_until_complete(asyncio.sleep(0.05))
    for _ in range(mw.hosts.max_connections):  # a.test has all its connections open elsewhere
        mw.hosts.start(busy_host)
    checks = _count_checks(mw)
    mw.table.finish(st, release=True, failed=False)
    loop.run_until_complete(asyncio.wait_for(second_task, 5))
    assert second.meta.get(M.SENT)
    assert not first_task.done() and not first.meta.get(M.SENT)
    assert checks[0] <= 4  # the release looked at each waiter once or twice, no more
    for _ in range(mw.hosts.max_connections):
        mw.hosts.finish(busy_host, release=True)
    mw.table.finish(st, release=True, failed=False)  # b.test's fetch ends: a.test may go
    loop.run_until_complete(asyncio.wait_for(first_task, 5))
    assert first.meta.get(M.SENT)
