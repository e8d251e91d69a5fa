"""Seeds whose DNS failed, asked again on demand (issue 34, point 6): ``-a retry=dns`` re-queues
the URLs a crawl dropped for DNS (kept in ``JOBDIR/dns_failed``), past the seen-set, even on a
crawl marked complete; without it they stay dropped. A real crawl of the test web on loopback,
the failing name answered NXDOMAIN by a small DNS server of our own."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from larbinscrapy.frontier import dnsfailed
from larbinscrapy.spiders.larbin import SpiderArgumentError, parse_retry
from tests.support.crawl import run_crawl, seeds_args
from tests.support.dnsserver import DnsServer


def test_the_kept_urls_are_taken_once_and_a_torn_line_is_left_out(tmp_path):
    log = dnsfailed.DnsFailedLog(tmp_path)
    log.add(["http://a.test/", "http://a.test/x"])
    log.add([])
    log.close()
    with open(tmp_path / dnsfailed.FILE, "a") as f:
        f.write("http://a.test/to")  # a kill in the middle of a write
    assert dnsfailed.take(tmp_path) == ["http://a.test/", "http://a.test/x"]
    assert not (tmp_path / dnsfailed.FILE).exists()
    # a retry killed before its end: its URLs are asked for again, with the new ones
    dnsfailed.DnsFailedLog(tmp_path).add(["http://b.test/", "http://a.test/"])
    assert dnsfailed.take(tmp_path) == ["http://a.test/", "http://a.test/x", "http://b.test/"]
    dnsfailed.retried(tmp_path)
    assert dnsfailed.take(tmp_path) == []


def test_the_retry_argument():
    assert parse_retry(None, "") is False
    assert parse_retry("dns", "job") is True
    with pytest.raises(SpiderArgumentError, match="takes dns"):
        parse_retry("robots", "job")
    with pytest.raises(SpiderArgumentError, match="JOBDIR"):
        parse_retry("dns", "")


@pytest.mark.crawl
def test_retry_dns_fetches_the_pages_of_a_host_that_failed(web, tmp_path):
    hosts = sorted(web.resolve)[:3]
    seeds = [web.url(host) for host in hosts]
    lost = hosts[1]
    missing = {h: ip for h, ip in web.resolve.items() if h != lost}
    with DnsServer({}, ip="127.33.0.53") as dns:  # every name: NXDOMAIN
        settings = {
            "JOBDIR": str(tmp_path / "job"),
            "LARBIN_DNS_SERVERS": dns.server,
            "LARBIN_RESOLVE": json.dumps(missing),
            "DEPTH_LIMIT": 1,
            "LARBIN_SITEMAPS": False,
        }
        first = run_crawl(web, tmp_path / "out1", *seeds_args(seeds), settings=settings)
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats.get("larbin/dropped/dns", 0) >= 1, first.stats
    assert not any(urlsplit(u).hostname == lost for u in first.fetched(web.port))

    settings["LARBIN_RESOLVE"] = json.dumps(web.resolve)  # the name resolves now
    settings.pop("LARBIN_DNS_SERVERS")
    again = run_crawl(web, tmp_path / "out2", *seeds_args(seeds), settings=settings)
    assert again.returncode == 0, again.stderr[-3000:]
    assert not any(urlsplit(u).hostname == lost for u in again.fetched(web.port))  # seen

    retry = run_crawl(
        web, tmp_path / "out3", *seeds_args(seeds), "-a", "retry=dns", settings=settings
    )
    assert retry.returncode == 0, retry.stderr[-3000:]
    assert seeds[1] in retry.fetched(web.port), retry.stderr[-3000:]
    said = [line for line in retry.stderr.splitlines() if "DNS failed" in line]
    count = retry.stats.get("larbin/seeds/retried_dns", 0)
    assert count >= 1 and len(said) == 1 and f" {count} URL" in said[0], retry.stderr[-3000:]

    # asked for once: a later run with the argument has nothing left to retry
    later = run_crawl(
        web, tmp_path / "out4", *seeds_args(seeds), "-a", "retry=dns", settings=settings
    )
    assert later.returncode == 0, later.stderr[-3000:]
    assert later.fetched(web.port) == set()
