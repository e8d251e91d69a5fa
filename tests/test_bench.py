"""The benchmark's own measuring pieces: the synthetic web, peak RSS, the ratios.

Not timings (those live in benchmarks/): that the web every peer crawls is what RESULTS.md says
it is, and that the runner measures what it claims to.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from benchmarks import peers
from benchmarks.run import Scenario, analyze_fetches, crawler_command, run_process, summarize
from tests.support.wait import wait_for
from testweb.synthweb import SynthWeb

NGINX = Path("/usr/sbin/nginx")
HREF = re.compile(r'<a href="([^"]*)"')


@pytest.fixture
def web(tmp_path):
    if not NGINX.exists():
        pytest.fail("nginx is missing: make install-system")
    with SynthWeb(4, 60, workdir=str(tmp_path / "web")) as running:
        yield running


def _a_links(web: SynthWeb, url: str) -> set[str]:
    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {urllib.parse.urljoin(url, h).partition("#")[0] for h in HREF.findall(body)}


@pytest.mark.crawl
def test_every_page_is_reachable_through_a_links_alone(web):
    # so that every peer (plain Scrapy's LinkExtractor ignores frames) can reach the ground truth
    seen, todo = set(web.seeds), list(web.seeds)
    while todo:
        for link in _a_links(web, todo.pop()):
            if link in web.pages and link not in seen:
                seen.add(link)
                todo.append(link)
    assert seen == web.pages


@pytest.mark.crawl
def test_the_web_has_dead_addresses_iframes_and_image_maps(web):
    html = "".join(p.read_text() for p in web.dir.glob("h*/**/*.html"))
    assert "<iframe src=" in html and "<area " in html
    dead = set(re.findall(r"http://(127\.0\.3\.\d+):", html))
    assert dead and dead <= {"127.0.3.1", "127.0.3.2", "127.0.3.3"}
    assert all(url.startswith("http://127.0.2.") for url in web.pages)  # named by IP


@pytest.mark.crawl
def test_access_log_counts_what_was_fetched(web):
    log_start = web.log_offset()
    for url in (web.seeds[0], web.seeds[0], web.seeds[1]):
        urllib.request.urlopen(url, timeout=10).read()
    entries = wait_for(
        lambda: len(web.access_log_entries(log_start)) >= 3 and web.access_log_entries(log_start),
        5,
        "nginx to log the three fetches",
    )
    fetched = analyze_fetches(web, entries)
    assert (fetched["pages_fetched"], fetched["unique_pages"], fetched["duplicates"]) == (3, 2, 1)


def test_peak_rss_is_the_childs_own(tmp_path):
    # ru_maxrss of a forked child keeps the parent's high-water mark from before exec: a child
    # that allocates nothing must not report this test process's size
    ballast = bytearray(200 * 1024 * 1024)  # make the runner big
    small = run_process([sys.executable, "-c", "pass"], tmp_path, {}, tmp_path / "small", 60)
    big = run_process(
        [sys.executable, "-c", "b = bytearray(400 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
        tmp_path,
        {},
        tmp_path / "big",
        60,
    )
    del ballast
    assert small["exit_code"] == big["exit_code"] == 0
    assert small["maxrss_mb"] < 60, small["maxrss_mb"]
    assert big["maxrss_mb"] > 400, big["maxrss_mb"]  # bigger than the runner: read exactly


def test_a_peak_just_before_the_exit_is_not_missed(tmp_path):
    # the child peaks and exits between two reads of its VmHWM (seen: 132.9 MB reported for
    # 150 MB under load): its own ru_maxrss, above the runner's, gives the peak
    for rep in range(5):
        big = run_process(
            [sys.executable, "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"],
            tmp_path,
            {},
            tmp_path / f"big{rep}",
            60,
        )
        assert big["exit_code"] == 0
        assert big["maxrss_mb"] > 300, (rep, big["maxrss_mb"])


def test_ratios_are_per_repetition_and_favour_larbin_above_one():
    def run(crawler: str, rep: int, cpu: float, pps: float, wall: float) -> dict:
        return {
            "crawler": crawler,
            "rep": rep,
            "status": "ok",
            "cpu_ms_per_page": cpu,
            "fetch_pages_per_s": pps,
            "wall_s": wall,
            "maxrss_mb": 100.0,
            "marginal_cpu_ms_per_page": None,
        }

    runs = [
        run("larbin", 0, 1.0, 800, 4),
        run("plain", 0, 5.0, 160, 20),
        run("larbin", 1, 2.0, 400, 8),
        run("plain", 1, 6.0, 200, 16),
    ]
    ratios = summarize(runs, ["plain", "larbin"], 2)["ratios"]["plain"]
    assert ratios["cpu_ms_per_page"] == pytest.approx((5.0 + 3.0) / 2)
    assert ratios["fetch_pages_per_s"] == pytest.approx((5.0 + 2.0) / 2)
    assert ratios["wall_s"] == pytest.approx((5.0 + 2.0) / 2)
    assert ratios["marginal_cpu_ms_per_page"] is None


@pytest.mark.crawl
def test_every_peer_has_a_command(web, tmp_path, monkeypatch):
    monkeypatch.setenv(peers.BASELINE_ENV, str(Path(__file__).resolve().parent.parent))
    assert peers.missing("baseline") is None
    sc = Scenario("cpu", 4, 60, 0.0, 1, 8, 100)
    for crawler in peers.CRAWLERS:
        for one_page in (False, True):
            cmd, cwd, _env = crawler_command(
                crawler, sc, web, tmp_path, tmp_path / "i.jsonl", one_page
            )
            assert cmd and cwd.exists()
    assert (tmp_path / "seeds.txt").read_text().split() == web.seeds


def test_the_seen_test_benchmark_reads_every_page_of_the_web():
    # bench_dupefilter's gate stream: every page's links, in crawl order (it once read the
    # web's files under the wrong directory and failed on the first page)
    from benchmarks.bench_dupefilter import synthweb_links

    stream = synthweb_links(hosts=2, pages=5)
    assert len(stream) == 10
    assert all(stream) and all(u.startswith("http://127.0.2.") for p in stream for u in p)


@pytest.mark.crawl
def test_the_paired_benchmark_runs_both_checkouts_at_once_on_twin_webs(tmp_path, monkeypatch):
    # benchmarks.ab's whole point: the two crawls overlap in time (so they meet the same machine
    # drift), each fetches its whole web, and the checkouts swap webs between pairs.
    from benchmarks.ab import paired_runs, summary

    monkeypatch.setenv(peers.BASELINE_ENV, str(Path(__file__).resolve().parent.parent))
    pairs = paired_runs(3, 12, 2, tmp_path)
    assert len(pairs) == 2
    for pair in pairs:
        before, after = pair["baseline"], pair["larbin"]
        assert before["status"] == after["status"] == "ok"
        assert before["coverage"] == after["coverage"] == 1.0
        assert before["port"] != after["port"]
        overlap = min(before["ended"], after["ended"]) - max(before["started"], after["started"])
        assert overlap > 0.5 * min(before["wall_s"], after["wall_s"])
    assert pairs[0]["larbin"]["port"] == pairs[1]["baseline"]["port"]
    result = summary(pairs)
    assert result["ok_pairs"] == 2 and result["ratio_median"] > 0


def test_a_watched_crawl_of_another_checkout_imports_that_checkouts_code(tmp_path):
    """``bench_internet --base``: ``python -m`` puts the working directory first on the import
    path, so the base checkout's crawl must run there, or both "trees" are this one's."""
    from testweb.internet.harness import run_watched

    tree = tmp_path / "base"
    (tree / "larbinscrapy").mkdir(parents=True)
    (tree / "larbinscrapy" / "__init__.py").write_text("")
    (tree / "larbinscrapy" / "__main__.py").write_text("print(__file__)\n")
    web_log = tmp_path / "web.log"
    web_log.write_text("")
    cmd = [sys.executable, "-m", "larbinscrapy"]
    run = run_watched(cmd, {"PATH": "/usr/bin:/bin"}, tmp_path, web_log, 30, 30, cwd=tree)
    assert run["exit_code"] == 0
    printed = (tmp_path / "crawl.log").read_text().strip()
    assert printed == str(tree / "larbinscrapy" / "__main__.py")


def test_the_transport_benchmark_carries_every_request_over_each_stack():
    """``bench_transport``: each stack checks the chain and the name against the test CA and
    gets every answer of every connection (a connection cut short fails the run). In its own
    process: it runs a reactor, which a process runs once."""
    args = ["--connections", "12", "--reps", "1", "--requests", "1,3"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_transport", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert set(result) == {
        f"{stack}, {n} a connection" for stack in ("twisted", "lean", "asyncio") for n in (1, 3)
    }
    assert all(r["us_a_request"] > 0 for r in result.values())


def test_udp_drops_are_read_from_the_namespaces_own_counters():
    """``bench_internet`` reports the UDP datagrams the kernel dropped for a full receive
    buffer in the crawl's namespace: DNS queries lost at the server, answers at the crawler."""
    from benchmarks.bench_internet import udp_receive_drops

    snmp = Path("/proc/net/snmp").read_text()
    assert isinstance(udp_receive_drops(snmp), int)
    sample = (
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
        "Udp: 87790 0 4255 92301 4255 0\n"
        "UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
        "UdpLite: 0 0 0 0 7 0\n"
    )
    assert udp_receive_drops(sample) == 4255
    assert udp_receive_drops("") is None
