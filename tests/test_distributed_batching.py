"""The Redis worker's batches (``distributed/jobs.py``) and compact tier entries, on a real
redis-server: order kept inside a pipeline, scripts loaded before a batch, a restarted Redis
(NOSCRIPT) handled, site and host derived by the scripts exactly as ``urls.site_of`` does,
and the bytes a queued URL costs in Redis."""

from __future__ import annotations

import json

import pytest
import redis

from larbinscrapy.distributed.frontier import NORMAL, RedisFrontier
from larbinscrapy.distributed.jobs import Call, run_call, run_calls
from larbinscrapy.parse.urls import host_of, site_of
from tests.support.crawl import seeds_args
from tests.support.workers import assert_clean_logs, start_worker, wait_workers


def _record(url: str) -> bytes:
    return b'["%s",0,{"depth":3,"larbin_site_depth":2}]' % url.encode()


def _admit(f: RedisFrontier, urls: list[str], worker: str = "w1") -> tuple[int, int]:
    entries = [(NORMAL, [], f.entry(site_of(u), host_of(u), _record(u))) for u in urls]
    return f.admit(worker, "t:seen", 0, entries)


@pytest.mark.crawl
def test_a_batch_keeps_its_order_when_its_scripts_were_never_loaded(redis_url):
    """release, ack and pop in one pipeline: the pop sees the release before it (a script
    loaded on demand after NOSCRIPT would have run after the pop)."""
    server = redis.Redis.from_url(redis_url)
    f = RedisFrontier(server, "t:frontier", max_per_site=40, connections=1)
    urls = [f"http://a.test/{i}" for i in range(3)]
    assert _admit(f, urls) == (3, 0)
    assert f.pop("w1", 8, 0).unresolved == ["a.test"]
    f.resolved("a.test", "127.0.0.1")
    first = f.pop("w1", 8, 0)
    assert [lease[0] for lease in first.leases] == ["0"]  # one connection: one lease
    server.script_flush()  # a restarted Redis forgets every script
    release, ack, pop = run_calls(
        server,
        [
            f.release_call("w1", "127.0.0.1", 0),
            f.admit_call("w1", "t:seen", 0, [], ["0"]),
            f.pop_call("w1", 8, 1),
        ],
    )
    assert (release.dropped, ack) == (0, (0, 0))
    assert [rec for _, _, rec in pop.leases] == [_record(urls[1])]


@pytest.mark.crawl
def test_failed_call_fails_alone_and_parse_errors_stay_in_their_job(redis_url):
    server = redis.Redis.from_url(redis_url)
    server.set("s", "x")
    ok, wrong, bad_parse = run_calls(
        server, [Call(("GET", "s")), Call(("LPUSH", "s", "y")), Call(("GET", "s"), int)]
    )
    assert ok == b"x"
    assert isinstance(wrong, redis.exceptions.ResponseError)
    assert isinstance(bad_parse, ValueError)
    with pytest.raises(redis.exceptions.ResponseError):
        run_call(server, Call(("LPUSH", "s", "y")))


@pytest.mark.crawl
@pytest.mark.parametrize(
    "url",
    [
        "http://a.test/0.html",
        "https://a.test/x?y=1",
        "http://a.test:8080/x",
        "https://www1.example.com:443/",
        "http://127.9.1.3/p",
        "http://a.test?q",
        "http://xn--bcher-kva.example/#f",
    ],
)
def test_compact_entry_gives_the_scripts_site_of_and_host_of(redis_url, url):
    """The record alone is stored; the sequencer's site list and DNS wait use the same site
    and host as the Python side computes."""
    server = redis.Redis.from_url(redis_url)
    f = RedisFrontier(server, "t:frontier")
    entry = f.entry(site_of(url), host_of(url), _record(url))
    assert entry == _record(url)
    assert _admit(f, [url]) == (1, 0)
    assert f.pop("w1", 8, 0).unresolved == [host_of(url)]
    assert server.llen(f"t:frontier:site:{site_of(url)}") == 1
    assert server.smembers(f"t:frontier:hostsites:{host_of(url)}") == {site_of(url).encode()}


@pytest.mark.parametrize(
    ("site", "host", "url"),
    [
        ("http://a.test", "a.test", "http://a.test/x"),  # a site not in site_of's form
        ("http://a.test:80", "a.test", "http://A.test/x"),  # not lower-case
        ("http://a.test:80", "b.test", "http://a.test/x"),  # another host
        ("ftp://a.test:21", "a.test", "ftp://a.test/x"),
    ],
)
def test_entries_the_scripts_cannot_derive_keep_site_and_host(site, host, url):
    assert RedisFrontier.entry(site, host, _record(url)) == (
        f"{site}\t{host}\t".encode() + _record(url)
    )


@pytest.mark.crawl
def test_a_queued_url_costs_at_most_100_bytes(redis_url):
    """INFO used_memory over 20,000 queued URLs of the benchmark web's shape (records of
    ~80 bytes): the tier lists and their counters."""
    server = redis.Redis.from_url(redis_url)
    f = RedisFrontier(server, "t:frontier")
    urls = [f"http://h{i % 20:04d}.bench:8080/s{i % 8}/page{i}.html" for i in range(20_000)]
    before = int(server.info("memory")["used_memory"])
    for i in range(0, len(urls), 1000):
        assert _admit(f, urls[i : i + 1000]) == (1000, 0)
    per_url = (int(server.info("memory")["used_memory"]) - before) / len(urls)
    assert per_url <= 100


@pytest.mark.crawl
def test_a_workers_content_checks_share_its_redis_thread_and_connection(web, tmp_path, redis_url):
    """A page's content check rides in the pipeline of the worker's own Redis thread: the check
    on or off, the worker opens as many connections to Redis (no second thread and client),
    and every page is still checked."""
    client = redis.Redis.from_url(redis_url)

    def crawl(name: str, content_dup: bool) -> tuple[int, dict[str, int]]:
        client.flushall()
        before = int(client.info("stats")["total_connections_received"])
        proc = start_worker(
            web,
            tmp_path / name,
            redis_url,
            *seeds_args(web.seeds),
            DOWNLOAD_DELAY=0,
            LARBIN_IP_DELAY=0,
            LARBIN_CONTENT_DUP=content_dup,
        )
        wait_workers([proc])
        assert proc.returncode == 0
        assert_clean_logs([proc])
        opened = int(client.info("stats")["total_connections_received"]) - before
        return opened, json.loads((proc.out / "stats.json").read_text())

    off, _ = crawl("off", False)
    on, stats = crawl("on", True)
    assert stats["item_scraped_count"] >= 20
    assert stats["larbin/contentdup/unique"] == stats["item_scraped_count"]
    assert stats["larbin/contentdup/dropped"] == stats["item_dropped_count"]
    assert on == off, (on, off)
