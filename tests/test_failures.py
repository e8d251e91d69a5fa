"""Which failures drop a host, how fast a dead one goes, and that no dead end keeps a crawl open.

Real servers only: ``testweb.rawweb`` writes hostile answers straight to the socket (a tarpit,
a reset in the middle of a body, a 1 MB header line, bytes that are not HTTP), and dead hosts
are loopback addresses where nothing listens (every connection is refused at once).
"""

from __future__ import annotations

import json
import time

import pytest
import redis
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from twisted.internet import error as txerror
from twisted.python.failure import Failure
from twisted.web._newclient import ParseError, ResponseFailed
from twisted.web.http import _DataLoss

from larbinscrapy.distributed.frontier import RedisFrontier
from larbinscrapy.politeness import failures
from tests.support.cores import ip_table
from tests.support.crawl import run_crawl
from tests.support.workers import assert_clean_logs, frontier_entry, start_worker, wait_workers
from testweb.rawweb import RawWeb

HOST_IP = "127.0.5.1"
TARPIT_IP = "127.0.5.2"
DEAD_IPS = ("127.0.9.1", "127.0.9.2", "127.0.9.3")
HOSTILE = ("/tarpit.html", "/reset.html", "/bigheader.html", "/garbage.html")
GOOD = tuple(f"/good{i}.html" for i in range(5))


def _hostile_pages() -> dict[str, dict]:
    pages: dict[str, dict] = {p: {"links": []} for p in GOOD}
    for path in HOSTILE:
        pages[path] = {"behaviour": path.strip("/").split(".")[0]}
    return pages


@pytest.mark.crawl
def test_hostile_urls_never_drop_a_host_whose_pages_answer(tmp_path):
    # The hostile URLs come first and robots.txt is off, so nothing good has been heard from
    # the IP when they fail: each must count against its URL (retried once, then dropped with
    # its reason), never against the host.
    with RawWeb(tmp_path / "web", _hostile_pages(), {"h.test": HOST_IP}) as web:
        urls = [web.url("h.test", p) for p in (*HOSTILE, *GOOD)]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            "urls=" + ",".join(urls),
            settings={"DOWNLOAD_TIMEOUT": 1, "ROBOTSTXT_OBEY": False, "LARBIN_IP_BACKOFF": 0.2},
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    fetched = {e["path"] for e in crawl.requests}
    assert fetched >= set(GOOD), crawl.stderr[-3000:]
    assert {item["url"] for item in crawl.items} == {web.url("h.test", p) for p in GOOD}
    stats = crawl.stats
    assert "larbin/ip/dropped" not in stats
    assert "larbin/dropped/noconnection" not in stats
    # each hostile URL: tried, retried once, then dropped under its reason
    tries = [e["path"] for e in crawl.requests]
    assert {p: tries.count(p) for p in HOSTILE} == dict.fromkeys(HOSTILE, 2)
    assert stats["larbin/dropped/timeout"] == 1
    assert stats["larbin/dropped/reset"] == 1
    assert stats["larbin/dropped/malformed"] == 2


@pytest.mark.crawl
def test_a_host_that_never_answers_robots_txt_included_ends_its_part(tmp_path):
    # Everything on t.test is a tarpit, robots.txt first: the site's pages wait for a robots.txt
    # that never comes, then time out themselves. The IP never answered, so its timeouts say
    # "gone": it is dropped after LARBIN_IP_FAILURES_MAX and the crawl ends; h.test is unharmed.
    pages: dict[str, dict] = {p: {"links": []} for p in GOOD}
    tarpit = {"behaviour": "tarpit"}
    # t.test's robots.txt only: an unreachable robots.txt disallows its site (RFC 9309)
    pages.update({"//t.test/robots.txt": tarpit, **{f"/t{i}.html": tarpit for i in range(5)}})
    hosts = {"h.test": HOST_IP, "t.test": TARPIT_IP}
    with RawWeb(tmp_path / "web", pages, hosts) as web:
        urls = [web.url("t.test", f"/t{i}.html") for i in range(5)]
        urls += [web.url("h.test", p) for p in GOOD]
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=0",
            "-a",
            "urls=" + ",".join(urls),
            settings={"DOWNLOAD_TIMEOUT": 1, "LARBIN_IP_BACKOFF": 0.2},
            timeout=60,
        )
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    assert {item["url"] for item in crawl.items} == {web.url("h.test", p) for p in GOOD}
    assert crawl.stats["larbin/ip/dropped"] == 1
    assert f"Dropping IP {TARPIT_IP}" in crawl.stderr
    assert sum(e["ip"] == TARPIT_IP for e in crawl.requests) == 3  # then nothing more was sent


PAGES = 8


def _dead_link_pages() -> dict[str, dict]:
    """A chain of pages, each linking to the next and to one new URL on every dead IP (the
    server's port, where nothing listens on those IPs): dead URLs keep arriving after their IP
    was dropped, as on the real web."""
    pages = {}
    for i in range(PAGES):
        dead = [f"http://{ip}:{{port}}/x{i}.html" for ip in DEAD_IPS]
        pages[f"/p{i}.html"] = {"links": [f"/p{i + 1}.html", *dead] if i + 1 < PAGES else dead}
    return pages


@pytest.mark.crawl
def test_dead_addresses_are_given_up_within_seconds(tmp_path):
    # Three loopback IPs where nothing listens, linked from the last pages of a small site:
    # the crawl must end a few seconds after its last good fetch (it waited 30 s with a
    # 10 s back-off per refusal before), and each dead IP is dropped.
    with RawWeb(tmp_path / "web", _dead_link_pages(), {"h.test": HOST_IP}) as web:
        crawl = run_crawl(
            web,
            tmp_path / "out",
            "-a",
            "depth=10",
            "-a",
            "urls=" + web.url("h.test", "/p0.html"),
            settings={"DOWNLOAD_DELAY": 0.2},
        )
        ended = time.time()
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]
    assert {item["url"] for item in crawl.items} == {
        web.url("h.test", f"/p{i}.html") for i in range(PAGES)
    }
    last_good = max(e["t"] for e in crawl.requests)
    tail = ended - last_good
    print(f"exit {tail:.2f} s after the last good fetch")
    assert tail < 6.0, tail
    assert crawl.stats["larbin/ip/dropped"] == 3
    assert crawl.stats["larbin/dropped/noconnection"] >= 3


class _Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_ip_that_answered_before_keeps_the_long_backoff():
    table = ip_table(0.5, clock=_Clock(), max_failures=3, backoff=10.0)
    new, known = table.get("127.0.9.1"), table.get("127.0.5.1")
    table.finish(known, release=False, failed=False)  # it answered once
    for st in (new, known):
        table.finish(st, release=False, failed=failures.REFUSED)
    assert table.delay(new) == 0.5  # never answered: only the politeness delay
    assert table.delay(known) == 0.5 + 10.0  # answered before: it may come back
    for _ in range(2):
        table.finish(new, release=False, failed=failures.REFUSED)
    assert new.dead and not known.dead


@pytest.mark.parametrize(
    ("outcomes", "dead", "strikes"),
    [
        # a host whose pages answer is never dropped for its hostile URLs
        (["timeout", "reset", "malformed", "timeout", "timeout", "malformed"], False, 3),
        (["reset", "timeout", "timeout", "timeout"], False, 3),
        # an IP that never answered and only times out is as good as gone
        (["timeout", "timeout", "timeout"], True, 3),
        (["refused", "unreachable", "refused"], True, 0),
        (["refused", "refused", False, "refused", "refused"], False, 0),  # an answer clears them
        (["timeout", "reset", "refused", "refused"], False, 2),  # reset: a server is there...
        (["timeout", "reset", "refused", "refused", "refused"], True, 2),  # ...refusals still count
        ([None, None, None, None], False, 0),  # not the IP's fault (a drop before sending)
    ],
)
def test_whose_failure_it_is(outcomes, dead, strikes):
    table = ip_table(0.0, clock=_Clock(), max_failures=3, backoff=1.0)
    st = table.get("127.0.5.1")
    for outcome in outcomes:
        table.count_outcome(st, outcome)
    assert (st.dead, min(st.strikes, 3)) == (dead, strikes)


def _failed(*reasons: BaseException) -> ResponseFailed:
    return ResponseFailed([Failure(r) for r in reasons])


def _wrapped(outer: type[Exception], cause: BaseException) -> Exception:
    exc = outer(str(cause))
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (DownloadConnectionRefusedError("refused"), failures.REFUSED),
        (txerror.ConnectionRefusedError(), failures.REFUSED),
        (txerror.NoRouteError(), failures.UNREACHABLE),
        (txerror.TCPTimedOutError(), failures.UNREACHABLE),
        (CannotResolveHostError("x"), failures.DNS),
        (DownloadTimeoutError("took longer"), failures.TIMEOUT),
        (txerror.TimeoutError(), failures.TIMEOUT),
        (ResponseDataLossError("loss"), failures.RESET),
        (
            _wrapped(DownloadFailedError, _failed(txerror.ConnectionLost(), _DataLoss())),
            failures.RESET,
        ),
        (
            _wrapped(DownloadFailedError, _failed(ParseError("non-integer status code", b"x"))),
            failures.MALFORMED,
        ),
        (_wrapped(DownloadFailedError, _failed(txerror.ConnectionDone())), failures.MALFORMED),
        (_failed(txerror.ConnectionLost()), failures.RESET),
        (IgnoreRequest("dropped"), None),
        (txerror.UserError(), None),  # a dial we stopped (a deadline): not the host gone
        (ValueError("a bug"), None),
    ],
)
def test_failure_kinds(exc, kind):
    assert failures.classify(exc) == kind


@pytest.mark.crawl
def test_distributed_workers_drop_dead_hosts_and_close(tmp_path, redis_url):
    # Two workers share a frontier whose only URLs left are on three dead IPs: they must
    # drop them from Redis (counted) and close, instead of idling at 0 pages/min forever.
    with RawWeb(tmp_path / "web", _dead_link_pages(), {"h.test": HOST_IP}) as web:
        seeds = [
            web.url("h.test", "/p0.html"),
            *(f"http://{ip}:{web.port}/seed.html" for ip in DEAD_IPS),
        ]
        args = ("-a", "depth=10", "-a", "urls=" + ",".join(seeds))
        # a short back-off, so that the IPs die while their URLs are still being discovered
        procs = [
            start_worker(
                web,
                tmp_path / f"w{i}",
                redis_url,
                *args,
                DOWNLOAD_DELAY=1.0,
                LARBIN_IP_BACKOFF=0.05,
            )
            for i in range(2)
        ]
        wait_workers(procs, timeout=90)
    assert [p.returncode for p in procs] == [0, 0]
    assert_clean_logs(procs)
    client = redis.Redis.from_url(redis_url)
    counts = client.hgetall("larbin:frontier:count")
    assert int(counts[b"queued"]) == 0 and int(counts[b"leased"]) == 0
    assert set(client.smembers("larbin:frontier:deadips")) == {ip.encode() for ip in DEAD_IPS}
    stats = [json.loads((p.out / "stats.json").read_text()) for p in procs]
    dropped = sum(s.get("larbin/dropped/noconnection", 0) for s in stats)
    failed = sum(s.get("larbin/failed/DownloadConnectionRefusedError", 0) for s in stats)
    # a page whose robots.txt was refused is not fetched (RFC 9309: unreachable = disallow)
    unreachable = sum(s.get("larbin/robots/unreachable", 0) for s in stats)
    assert dropped + failed + unreachable == len(DEAD_IPS) * (PAGES + 1)  # each one, once


@pytest.mark.crawl
def test_frontier_drops_urls_that_reach_a_dead_ip_later(redis_url):
    # The Lua side of the dead end: a host's URLs admitted after its IP was released dead
    # (its site list was empty then, so no site was dropped) must be dropped, not parked.
    server = redis.Redis.from_url(redis_url)
    f = RedisFrontier(server, "t:frontier")
    first = [(2, [], frontier_entry(f, "http://d.test/0"))]
    f.admit("w1", "t:seen", 0, first)
    assert f.pop("w1", 8, 0).unresolved == ["d.test"]
    f.resolved("d.test", "127.0.9.1")
    ((lease, ip, _),) = f.pop("w1", 8, 0).leases
    f.release("w1", ip, 0.0, dead=True)
    f.admit(
        "w1",
        "t:seen",
        0,
        [(2, [], frontier_entry(f, f"http://d.test/{i}")) for i in (1, 2)],
        [lease],
    )
    popped = f.pop("w1", 8, 10)
    assert not popped.leases
    assert popped.dropped == 2
    assert f.status("t:start")["queued"] == 0
