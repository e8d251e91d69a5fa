"""Deploying to a real scrapyd: egg from a clean copy, basic auth, crawls and resumes over the API.

One scrapyd (``python -m scrapyd``) per module, bound to 127.0.0.1 with a username and password,
in an empty working directory. The egg's settings module is ``larbinscrapy.profile`` (no
top-level ``settings``, which a ``settings.py`` in scrapyd's working directory would shadow). The
project is deployed once with ``scrapyd-deploy`` from a copy of the files a clone would hold;
every crawl test then schedules the ``larbin`` spider over HTTP against its own test web.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from scrapy.settings import default_settings

from settings.base import RETRY_TIMES
from tests.support.crawl import clean_copy
from testweb.harness import RunningWeb, page_counts, sitemap_counts

pytestmark = pytest.mark.crawl  # subprocess crawls, outside servers: not in make test-fast

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROJECT, SPIDER = "larbinscrapy", "larbin"
USERNAME = "larbin"
PASSWORD = "s3cret-$HOME"  # a "$" proves the value is not expanded twice on its way


@dataclass
class Scrapyd:
    """A running scrapyd: its URL, credentials and directories."""

    proc: subprocess.Popen[bytes]
    url: str
    workdir: Path
    console: Path  # scrapyd's own stdout+stderr

    def call(
        self,
        endpoint: str,
        data: dict[str, Any] | list[tuple[str, str]] | None = None,
        auth: tuple[str, str] | None = (USERNAME, PASSWORD),
    ) -> requests.Response:
        """GET ``endpoint``, or POST it when ``data`` is given."""
        if data is None:
            return requests.get(self.url + endpoint, auth=auth, timeout=30)
        return requests.post(self.url + endpoint, data=data, auth=auth, timeout=60)

    def api(self, endpoint: str, data: Any = None, **params: str) -> dict[str, Any]:
        response = self.call(endpoint + _query(params), data)
        response.raise_for_status()
        answer = response.json()
        if answer.get("status") != "ok":
            raise AssertionError(f"{endpoint}: {answer}")
        return answer


@dataclass
class Deploy:
    """What one ``scrapyd-deploy`` run did to the repository it ran in."""

    returncode: int
    output: str
    repo: Path
    before: dict[str, str]  # relative path -> sha256, before scrapyd-deploy ran
    after: dict[str, str]


def _query(params: dict[str, str]) -> str:
    return "?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment without our PYTHONPATH (scrapyd must run the egg, not the repo)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "SCRAPY_SETTINGS_MODULE") and not k.startswith("SCRAPYD_")
    }
    return {**env, "HOME": str(home), **extra}


@pytest.fixture(scope="module")
def scrapyd(tmp_path_factory: pytest.TempPathFactory) -> Scrapyd:
    workdir = tmp_path_factory.mktemp("scrapyd")
    (workdir / "home").mkdir()
    port = _free_port()
    (workdir / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        "bind_address = 127.0.0.1\n"
        f"http_port = {port}\n"
        f"username = {USERNAME}\n"
        f"password = {PASSWORD.replace('%', '%%')}\n"
        f"eggs_dir = {workdir / 'eggs'}\n"
        f"logs_dir = {workdir / 'logs'}\n"
        f"items_dir = {workdir / 'items'}\n"
        f"dbs_dir = {workdir / 'dbs'}\n"
        "jobs_dir =\n"  # empty: scrapyd's per-job JOBDIR would override ours
        "jobs_to_keep = 20\n"
        "poll_interval = 0.2\n"
        "max_proc = 1\n"
    )
    console = workdir / "scrapyd.out"
    with open(console, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scrapyd"],
            cwd=workdir,
            env=_clean_env(workdir / "home"),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = Scrapyd(proc, f"http://127.0.0.1:{port}/", workdir, console)
    deadline = time.monotonic() + 30
    while True:
        try:
            if running.call("daemonstatus.json").status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("scrapyd did not start:\n" + console.read_text()[-3000:])
        time.sleep(0.2)
    yield running
    _stop(running)


def _stop(scrapyd: Scrapyd) -> None:
    """Kill the jobs still there (scrapyd leaves its crawl processes running), then scrapyd."""
    try:
        jobs = scrapyd.api("listjobs.json")
        for job in jobs["pending"] + jobs["running"]:
            scrapyd.api(
                "cancel.json", {"project": job["project"], "job": job["id"], "signal": "KILL"}
            )
    finally:
        scrapyd.proc.terminate()
        try:
            scrapyd.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            scrapyd.proc.kill()
            scrapyd.proc.wait()


def _snapshot(repo: Path) -> dict[str, str]:
    return {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in repo.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def _deploy(repo: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "scrapyd-deploy"), *args],
        cwd=repo,
        text=True,
        capture_output=True,
        env=_clean_env(home, **env),
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def deployed(scrapyd: Scrapyd, tmp_path_factory: pytest.TempPathFactory) -> Deploy:
    """``scrapyd-deploy`` from a clean copy, URL and credentials from the environment."""
    repo = clean_copy(tmp_path_factory.mktemp("clone"))
    home = tmp_path_factory.mktemp("home")  # no ~/.netrc: the environment must be enough
    before = _snapshot(repo)
    result = _deploy(
        repo,
        home,
        "-v",
        "1-env",
        SCRAPYD_URL=scrapyd.url,
        SCRAPYD_USERNAME=USERNAME,
        SCRAPYD_PASSWORD=PASSWORD,
    )
    return Deploy(result.returncode, result.stdout + result.stderr, repo, before, _snapshot(repo))


@pytest.fixture
def project(scrapyd: Scrapyd, deployed: Deploy) -> Scrapyd:
    """scrapyd with the project deployed (the deploy test says why if it is not)."""
    if deployed.returncode != 0:
        raise AssertionError("scrapyd-deploy failed:\n" + deployed.output[-3000:])
    return scrapyd


def schedule(
    scrapyd: Scrapyd, web: RunningWeb, *, settings: dict[str, Any] | None = None, **args: str
) -> str:
    """Schedule the larbin spider against ``web``; ``args`` are spider arguments."""
    merged = {
        "LARBIN_RESOLVE": json.dumps(web.resolve),
        "LARBIN_ALLOWED_NETWORKS": "127.0.0.0/8",
        "DOWNLOAD_DELAY": 0,
        **(settings or {}),
    }
    data = [("project", PROJECT), ("spider", SPIDER), *args.items()]
    data += [("setting", f"{key}={value}") for key, value in merged.items()]
    return scrapyd.api("schedule.json", data)["jobid"]


def wait_finished(scrapyd: Scrapyd, job: str, timeout: float = 120) -> dict[str, Any]:
    """Poll listjobs.json until ``job`` is finished; return its entry."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = scrapyd.api("listjobs.json", project=PROJECT)
        for entry in jobs["finished"]:
            if entry["id"] == job:
                return entry
        time.sleep(0.3)
    scrapyd.api("cancel.json", {"project": PROJECT, "job": job, "signal": "KILL"})
    logs = list((scrapyd.workdir / "logs").rglob(f"{job}.log"))
    log = logs[0].read_text() if logs else scrapyd.console.read_text()
    raise AssertionError(f"job {job} did not finish in {timeout}s (killed):\n{log[-3000:]}")


def job_log(scrapyd: Scrapyd, entry: dict[str, Any]) -> str:
    """The job's Scrapy log, fetched as a user would: from its ``log_url``."""
    response = scrapyd.call(entry["log_url"].lstrip("/"))
    response.raise_for_status()
    return response.text


def job_items(scrapyd: Scrapyd, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's items (scrapyd's items_dir feed, JSON lines) from its ``items_url``."""
    response = scrapyd.call(entry["items_url"].lstrip("/"))
    response.raise_for_status()
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def exit_status(scrapyd: Scrapyd, job: str) -> str:
    """How scrapyd saw the job's process end ("finished" or "died: exitstatus=N")."""
    for line in scrapyd.console.read_text().splitlines():
        if f"job={job!r}" in line:
            if "Process finished:" in line:
                return "finished"
            if "Process died:" in line:
                return "died: " + line.split("Process died: ", 1)[1].split(" ", 1)[0]
    return "unknown"


def refetched(web: RunningWeb, counts: Counter[str]) -> list[str]:
    """Pages fetched more than once, a retried server error (RETRY_TIMES more) excepted."""
    retry = {int(code) for code in default_settings.RETRY_HTTP_CODES}
    return sorted(
        u
        for u, n in counts.items()
        if n > (1 + RETRY_TIMES if web.web.pages[u].status in retry else 1)
    )


def fetch_counts(web: RunningWeb, start: int = 0) -> Counter[str]:
    """Pages requested from the test web (robots.txt, /sitemap.xml set apart), from its log."""
    return page_counts(web.read_log()[start:], web.port)


# --- deploy and auth ------------------------------------------------------------------------


def test_deploy_from_clean_copy_writes_only_ignored_files(scrapyd: Scrapyd, deployed: Deploy):
    assert deployed.returncode == 0, deployed.output[-3000:]
    assert '"status": "ok"' in deployed.output
    changed = [p for p in deployed.before if deployed.after.get(p) != deployed.before[p]]
    assert changed == []  # nothing edited or removed (no setup.py rewritten)
    created = sorted(set(deployed.after) - set(deployed.before))
    assert created, "expected build/ and *.egg-info/ leftovers (is the check still useful?)"
    not_ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "-v", "-n", *created],
        cwd=deployed.repo,
        capture_output=True,
        text=True,
        check=False,  # exit status 1: no path is ignored
    ).stdout
    unmatched = [
        line.split("\t", 1)[1] for line in not_ignored.splitlines() if line.startswith("::")
    ]
    assert unmatched == [], f"scrapyd-deploy wrote files .gitignore does not cover: {unmatched}"
    versions = scrapyd.api("listversions.json", project=PROJECT)["versions"]
    assert "1-env" in versions
    assert scrapyd.api("listspiders.json", project=PROJECT)["spiders"] == [SPIDER]


def test_egg_has_no_top_level_settings_module(project: Scrapyd):
    # What `pip install larbinscrapy` installs is what the egg holds (pyproject's packages.find):
    # larbinscrapy alone, the settings module scrapyd runs inside it.
    eggs = list((project.workdir / "eggs" / PROJECT).glob("1-env*.egg"))
    assert len(eggs) == 1, list((project.workdir / "eggs").rglob("*"))
    with zipfile.ZipFile(eggs[0]) as egg:
        tops = {name.split("/", 1)[0] for name in egg.namelist()}
        entry_points = egg.read("EGG-INFO/entry_points.txt").decode()
        top_level = egg.read("EGG-INFO/top_level.txt").decode().split()
    assert tops == {"EGG-INFO", "larbinscrapy"}
    assert top_level == ["larbinscrapy"]
    assert "settings = larbinscrapy.profile" in entry_points


def test_deploy_with_netrc_credentials(scrapyd: Scrapyd, deployed: Deploy, tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    netrc = home / ".netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USERNAME} password {PASSWORD}\n")
    netrc.chmod(0o600)
    # The default target takes the credentials from the environment only: unset, it fails
    # with 401 (scrapyd-client leaves "${SCRAPYD_USERNAME}" as the literal user name).
    result = _deploy(deployed.repo, home, "-v", "2-env-unset", SCRAPYD_URL=scrapyd.url)
    assert result.returncode == 1 and "401" in result.stderr, result.stderr[-2000:]
    result = _deploy(deployed.repo, home, "netrc", "-v", "2-netrc", SCRAPYD_URL=scrapyd.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2-netrc" in scrapyd.api("listversions.json", project=PROJECT)["versions"]


def test_unauthenticated_calls_are_refused(project: Scrapyd):
    assert project.call("daemonstatus.json", auth=None).status_code == 401
    assert project.call("daemonstatus.json", auth=(USERNAME, "wrong")).status_code == 401
    data = {"project": PROJECT, "spider": SPIDER, "urls": "http://h01.test/"}
    assert project.call("schedule.json", data, auth=None).status_code == 401
    assert project.call("listjobs.json", auth=None).status_code == 401
    assert project.api("listjobs.json", project=PROJECT)["pending"] == []


# --- crawls over the API --------------------------------------------------------------------


def test_crawl_scheduled_with_urls_equals_ground_truth(project: Scrapyd, web: RunningWeb):
    job = schedule(project, web, urls=",".join(web.seeds))
    entry = wait_finished(project, job)
    log = job_log(project, entry)
    assert exit_status(project, job) == "finished", log[-3000:]
    assert "'finish_reason': 'finished'" in log, log[-3000:]
    truth = web.web.ground_truth(web.seeds, depth=5)
    fetched = fetch_counts(web)
    assert set(fetched) == truth
    assert refetched(web, fetched) == []
    sitemaps = sitemap_counts(web.read_log(), web.port)  # LARBIN_SITEMAPS: each site asked once
    assert sitemaps == Counter(dict.fromkeys(web.web.sitemap_truth(web.seeds, depth=5), 1))
    # Items: one per fetched 2xx page, except byte-identical bodies (the content-duplicate
    # pipeline keeps the first of each group, whichever the crawl order made first).
    items = Counter(item["url"] for item in job_items(project, entry))
    assert [u for u, n in items.items() if n > 1] == []
    # Non-HTML answers are stopped at their headers (larbin checkType): requested, no item.
    ok_pages = {
        u for u in truth if 200 <= web.web.pages[u].status < 300 and web.web.pages[u].is_html
    }
    duplicates = {u for group in web.web.duplicate_groups for u in group}
    assert set(items) <= ok_pages
    assert ok_pages - set(items) <= duplicates
    for group in web.web.duplicate_groups:
        if group & ok_pages:
            assert len(group & set(items)) == 1, sorted(group)


def test_missing_seeds_path_fails_and_says_how_to_pass_seeds(
    project: Scrapyd, web: RunningWeb, tmp_path: Path
):
    missing = tmp_path / "on-the-client" / "seeds.txt"  # as if typed on another machine
    job = schedule(project, web, seeds=str(missing))
    entry = wait_finished(project, job, timeout=60)
    log = job_log(project, entry)
    assert exit_status(project, job) == "died: exitstatus=1", log[-3000:]
    assert f"seeds file {str(missing)!r} does not exist on this host" in log, log[-3000:]
    assert "-d urls=" in log and "-d seeds=package:larbinscrapy/seedlists/" in log
    assert fetch_counts(web) == Counter()


def test_cancel_and_reschedule_with_same_jobdir_resumes(
    project: Scrapyd, web: RunningWeb, tmp_path: Path
):
    truth = web.web.ground_truth(web.seeds, depth=5)
    jobdir = tmp_path / "jobdir"
    settings = {"JOBDIR": str(jobdir), "DOWNLOAD_DELAY": 0.5}
    first = schedule(project, web, settings=settings, urls=",".join(web.seeds))
    deadline = time.monotonic() + 60
    while sum(fetch_counts(web).values()) < len(truth) // 4:
        if time.monotonic() > deadline:
            raise AssertionError(
                "the first run fetched too little:\n" + project.console.read_text()[-3000:]
            )
        time.sleep(0.1)
    assert project.api("cancel.json", {"project": PROJECT, "job": first})["prevstate"] == "running"
    entry = wait_finished(project, first, timeout=90)
    log = job_log(project, entry)
    assert "shutting down gracefully" in log and "'finish_reason': 'shutdown'" in log, log[-3000:]
    first_run = fetch_counts(web)
    assert len(first_run) < len(truth), "cancelled too late to test a resume"

    start = len(web.read_log())
    second = schedule(project, web, settings={"JOBDIR": str(jobdir)}, urls=",".join(web.seeds))
    entry = wait_finished(project, second)
    log = job_log(project, entry)
    assert "'finish_reason': 'finished'" in log, log[-3000:]
    second_run = fetch_counts(web, start)
    assert second_run, "the second run fetched nothing"
    union = first_run + second_run
    assert set(union) == truth
    assert refetched(web, union) == []
    sitemaps = sitemap_counts(web.read_log(), web.port)  # read once, the cancel in between
    assert sitemaps == Counter(dict.fromkeys(web.web.sitemap_truth(web.seeds, depth=5), 1))


def test_seeds_file_shipped_in_the_package(
    project: Scrapyd, deployed: Deploy, web: RunningWeb, tmp_path: Path
):
    # The server cannot read the client's files, but it can read the egg: a seeds file placed
    # in larbinscrapy/seedlists/ before deploying is packaged (setup.py package_data).
    repo = clean_copy(tmp_path / "clone")
    seedlist = repo / "larbinscrapy" / "seedlists" / "testweb.txt"
    seedlist.parent.mkdir(parents=True, exist_ok=True)
    seedlist.write_text("# the test web's seeds\n" + "\n".join(web.seeds) + "\n")
    result = _deploy(
        repo,
        tmp_path,
        "-v",
        "3-seedlist",
        SCRAPYD_URL=project.url,
        SCRAPYD_USERNAME=USERNAME,
        SCRAPYD_PASSWORD=PASSWORD,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    job = schedule(
        project,
        web,
        _version="3-seedlist",
        depth="0",
        seeds="package:larbinscrapy/seedlists/testweb.txt",
    )
    entry = wait_finished(project, job)
    assert exit_status(project, job) == "finished", job_log(project, entry)[-3000:]
    assert set(fetch_counts(web)) == web.web.ground_truth(web.seeds, depth=0)

    job = schedule(project, web, _version="3-seedlist", seeds="package:larbinscrapy/seedlists/no")
    entry = wait_finished(project, job, timeout=60)
    log = job_log(project, entry)
    assert exit_status(project, job) == "died: exitstatus=1", log[-3000:]
    assert "no seeds file 'seedlists/no' in package 'larbinscrapy'" in log, log[-3000:]
