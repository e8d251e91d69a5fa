"""A shared address stops being crawled with sitemaps on (issue 35's "a shared address can stop
being crawled").

40 hosts of the simulated internet in a network namespace, sitemaps on (the default). A page
redirected bare name -> www went back to the frontier; a sitemap of the bare name was
redirected to www too. The sitemap, which holds no lease, started the www robots.txt read
and waited for a connection of the address; the www page, handed out on the address's only
connection, waited for that very read while holding the connection: the address got nothing
more and the crawl sat idle with URLs queued, never exiting. A leased request that waits for
a robots.txt another request is reading now gives its connection back first.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.marks import require_crawl_marker
from testweb.internet.analyze import analyze, load
from testweb.internet.dns import dns_address
from testweb.internet.harness import InternetProcess, crawl_command, run_watched
from testweb.internet.netns import Namespace, leftovers

ROOT = Path(__file__).resolve().parents[1]
BASE = "127.100.0.0"
HOSTS, SEED = 40, 9  # h31.sim.test redirects to www.h31.sim.test, on an address it shares


@pytest.mark.crawl
def test_a_redirected_sitemap_does_not_stall_its_address(tmp_path: Path) -> None:
    require_crawl_marker("a crawl of the simulated internet")
    logdir = tmp_path / "internet"
    args = [
        "--hosts",
        str(HOSTS),
        "--seed",
        str(SEED),
        "--base",
        BASE,
        "--write-seeds",
        str(logdir / "seeds.txt"),
    ]
    with Namespace(dns_address(BASE), name=f"stall-{os.getpid()}") as ns:
        with InternetProcess(logdir, args, netns=ns) as running:
            env = {**os.environ, "PYTHONPATH": str(ROOT), "SSL_CERT_FILE": running.ca}
            cmd = ns.command(
                crawl_command(
                    logdir / "seeds.txt", tmp_path, ["DOWNLOAD_TIMEOUT=3", "LARBIN_SITEMAPS=True"]
                )
            )
            run = run_watched(cmd, env, tmp_path, logdir / "web.log", timeout=90, stall=8, grace=3)
        name = ns.name
    assert name not in leftovers()
    report = analyze(*load(logdir))
    log = (tmp_path / "crawl.log").read_text(errors="replace")
    assert run["stopped"] == "" and run["exit_code"] == 0, (run, log[-2000:])
    assert report["coverage"] == 1.0 and report["host_coverage"] == 1.0, report
