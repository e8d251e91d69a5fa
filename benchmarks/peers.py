"""The crawlers the benchmark compares, and the command line of each.

- ``plain``: ``plain_spider.py``, a Scrapy ``CrawlSpider`` with the broad-crawl settings (the
  project's venv);
- ``crawlee``: ``crawlee_spider.py``, crawlee-python's ``ParselCrawler`` with in-memory storage,
  in its own venv ``benchmarks/.venv-crawlee`` (``make bench-crawlee-venv``);
- ``wget``: ``wget -r -l inf -H``, robots on, one try, files kept in the work dir (Debian's);
- ``larbin``: ``python -m scrapy crawl larbin`` from the repository root;
- ``baseline``: the same from another checkout (``--baseline DIR``, e.g. the main branch), to
  measure a change before and after in one run.

Every peer follows ``<a>``/``<area>`` links; crawlee, wget and larbinscrapy also
``<frame>``/``<iframe>`` (Scrapy's ``LinkExtractor`` does not: the synthetic web keeps every page
reachable through ``<a>`` so that all can cover it). All obey robots.txt. A peer that is not
installed is reported ``absent`` and the others are still measured. On a TLS web (self-signed
certificate) each is told to accept it: Scrapy and larbinscrapy do not verify by default,
crawlee gets ``--insecure`` (``ImpitHttpClient(verify=False)``), wget
``--no-check-certificate``.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testweb.synthweb import SynthWeb

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PLAIN_SPIDER = HERE / "plain_spider.py"
CRAWLEE_SPIDER = HERE / "crawlee_spider.py"
CRAWLEE_PYTHON = Path(os.environ.get("BENCH_CRAWLEE_PYTHON", HERE / ".venv-crawlee/bin/python"))
WGET = "wget"
CRAWLERS = ("plain", "crawlee", "wget", "baseline", "larbin")
LABELS = {
    "plain": "plain Scrapy",
    "crawlee": "crawlee-python",
    "wget": "wget -r",
    "baseline": "larbinscrapy baseline",
    "larbin": "larbinscrapy",
}
BASELINE_ENV = "BENCH_BASELINE_REPO"  # the checkout the baseline peer runs from
# wget exits 4 when a connection failed (the web's dead addresses) and 8 on an error status:
# both are what a crawl of a real web ends with
OK_EXIT_CODES = {"wget": (0, 4, 8)}
INSTALL_HINT = {"crawlee": "make bench-crawlee-venv", "wget": "apt-get install wget"}


def missing(crawler: str) -> str | None:
    """Why ``crawler`` cannot run here (with how to install it), or None."""
    if crawler == "crawlee" and not CRAWLEE_PYTHON.exists():
        return f"{CRAWLEE_PYTHON} not found ({INSTALL_HINT['crawlee']})"
    if crawler == "wget" and shutil.which(WGET) is None:
        return f"wget not found ({INSTALL_HINT['wget']})"
    if crawler == "baseline":
        root = os.environ.get(BASELINE_ENV)
        if not root or not (Path(root) / "larbinscrapy").is_dir():
            return f"no larbinscrapy checkout given (--baseline DIR; {BASELINE_ENV}={root!r})"
    return None


def _checkout(crawler: str) -> Path:
    """The repository a larbinscrapy peer runs from."""
    return REPO if crawler == "larbin" else Path(os.environ[BASELINE_ENV]).resolve()


def compile_bytecode(crawler: str) -> None:
    """Write the ``.pyc`` files of a larbinscrapy peer's checkout before it is measured.

    An installed package has them (pip compiles it). A checkout run with
    ``PYTHONDONTWRITEBYTECODE=1``, or edited since its last run, compiles every changed module
    again at each start instead: measured 0.12 s of a 0.59 s one-page crawl, charged to
    whichever checkout was edited last.
    """
    if crawler not in ("larbin", "baseline") or missing(crawler):
        return
    repo = _checkout(crawler)
    for package in ("larbinscrapy", "settings"):
        compileall.compile_dir(repo / package, quiet=1)


def command(
    crawler: str,
    *,
    web: SynthWeb,
    work: Path,
    items: Path,
    delay: float,
    per_domain: int | None,
    concurrent: int | None,
    one_page: bool = False,
    extra: tuple[str, ...] = (),
) -> tuple[list[str], Path, dict[str, str]]:
    """The command line, working directory and environment of one crawl.

    ``one_page``: the same crawler closed after its first page (its start-up cost). ``extra``
    are ``KEY=VALUE`` settings for the Scrapy-based peers (``-s``).
    """
    seeds = work / "seeds.txt"
    seeds.write_text("\n".join(web.seeds) + "\n")
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    extra_args = [a for kv in extra for a in ("-s", kv)]
    if one_page and crawler in ("plain", "larbin", "baseline"):
        extra_args += ["-s", "CLOSESPIDER_PAGECOUNT=1"]
    if crawler == "plain":
        cmd = [
            sys.executable,
            str(PLAIN_SPIDER),
            "--seeds-file",
            str(seeds),
            "--resolve",
            json.dumps(web.resolve),
            "--out",
            str(items),
            "--delay",
            str(delay),
        ]
        if per_domain is not None:
            cmd += ["-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={per_domain}"]
        if delay:
            # jitter is Scrapy's default; off so violations measure enforcement, not chance
            cmd += ["-s", "RANDOMIZE_DOWNLOAD_DELAY=False"]
        return cmd + extra_args, work, env
    if crawler == "crawlee":
        cmd = [
            str(CRAWLEE_PYTHON),
            str(CRAWLEE_SPIDER),
            "--seeds-file",
            str(seeds),
            "--out",
            str(items),
            "--concurrency",
            str(concurrent or 100),
        ]
        if web.tls:
            cmd.append("--insecure")
        return cmd + (["--max-pages", "1"] if one_page else []), work, env
    if crawler == "wget":
        return _wget(web, work, items, seeds, delay, one_page), work, env
    if crawler not in ("larbin", "baseline"):
        raise ValueError(f"unknown crawler {crawler!r}: choose from {', '.join(CRAWLERS)}")
    repo = _checkout(crawler)
    env["PYTHONPATH"] = str(repo)  # that checkout only: never the other one's modules
    if not (repo / "scrapy.cfg").exists():
        env["SCRAPY_SETTINGS_MODULE"] = "settings.base"
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        f"seeds={seeds}",
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8",
        "-s",
        f"DOWNLOAD_DELAY={delay:g}",
    ]
    if web.resolve:
        cmd += ["-s", f"LARBIN_RESOLVE={json.dumps(web.resolve)}"]
    if concurrent is not None:
        cmd += ["-s", f"CONCURRENT_REQUESTS={concurrent}"]
    if per_domain is not None:  # one host per IP: the same budget at both levels
        cmd += [
            "-s",
            f"CONCURRENT_REQUESTS_PER_DOMAIN={per_domain}",
            "-s",
            f"LARBIN_IP_CONNECTIONS={per_domain}",
        ]
    cmd += ["-s", "LARBIN_DEPTH=1000", "-s", "LOG_LEVEL=INFO", "-O", str(items)]
    return cmd + extra_args, repo, env


def _wget(
    web: SynthWeb, work: Path, items: Path, seeds: Path, delay: float, one_page: bool
) -> list[str]:
    """wget's recursive crawl: one connection, sequential, files kept under the work dir.

    Files are kept (``--delete-after`` makes wget forget what it fetched and refetch pages:
    measured 4-10 fetches per page). Its log (``-nv``: one line per file) is the items file.
    """
    if web.resolve:
        raise ValueError("wget has no resolver override: use a web named by IP (named=False)")
    out = work / f"wget-{items.stem}"
    cmd = [
        WGET,
        "-nv",
        "-o",
        str(items),
        "-e",
        "robots=on",
        "--tries=1",
        "--timeout=15",
        "-P",
        str(out),
    ]
    if web.tls:
        cmd.append("--no-check-certificate")
    if delay:
        cmd += [f"--wait={delay:g}"]
    if one_page:
        return [*cmd, web.seeds[0]]
    return [*cmd, "-r", "-l", "inf", "-H", "-i", str(seeds)]


def describe() -> dict[str, Any]:
    """What each peer is, for the report."""
    return {k: {"label": LABELS[k], "missing": missing(k)} for k in CRAWLERS}
