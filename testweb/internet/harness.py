"""Start the simulated internet for a test or a benchmark: in a subprocess, or in a thread.

``InternetProcess(logdir, ["--hosts", "500"], netns=ns)`` runs ``python -m testweb.internet``
(inside the namespace when given), waits for its ``internet.json`` line and stops it with
SIGTERM (it flushes its logs). ``InternetThread(internet, logdir)`` serves DNS and the web on an
asyncio loop in a background thread of the test process, for tests that need no namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testweb.internet.dns import DnsServer
from testweb.internet.loopthread import LoopThread
from testweb.internet.model import Internet
from testweb.internet.tls import TestCA
from testweb.internet.web import WebServer

if TYPE_CHECKING:
    from types import TracebackType

    from testweb.internet.netns import Namespace

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


def crawl_command(seeds: Path, out: Path, extra: list[str]) -> list[str]:
    """``scrapy crawl larbin`` of ``seeds`` with the system resolver: the simulated internet's
    addresses allowed (``::1`` too), no depth limit, certificates checked (trust the CA with
    ``SSL_CERT_FILE``); ``extra`` are more ``KEY=VALUE`` settings. With a ``JOBDIR`` among them
    the items are appended (``-o``): the same command again resumes the crawl, where ``-O``
    would be refused (it would empty the items of the pages not fetched again)."""
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "larbin",
        "-a",
        f"seeds={seeds}",
        "-s",
        "LARBIN_ALLOWED_NETWORKS=127.0.0.0/8,::1/128",
        "-s",
        "DOWNLOAD_DELAY=0",
        "-s",
        "DOWNLOAD_VERIFY_CERTIFICATES=True",
        "-s",
        "LARBIN_DEPTH=1000",
        "-s",
        f"LARBIN_STATS_FILE={out / 'stats.json'}",
        "-s",
        "LOG_LEVEL=INFO",
        "-o" if any(kv.startswith("JOBDIR=") for kv in extra) else "-O",
        str(out / "items.jsonl"),
    ]
    for kv in extra:
        cmd += ["-s", kv]
    return cmd


def _proc_status(pid: int) -> tuple[int, int, int]:
    """(VmHWM KiB, VmRSS KiB, open fds) of ``pid`` now (zeros when it is gone)."""
    hwm = rss = 0
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith(b"VmRSS:"):
                    rss = int(line.split()[1])
                    return hwm, rss, fds
    except (OSError, ValueError):
        pass
    return hwm, rss, 0


def _watch(
    proc: subprocess.Popen[bytes],
    web_log: Path,
    start: float,
    timeout: float,
    stall: float,
    grace: float,
    rss: list[tuple[float, int]],
) -> tuple[int, Any, str, int, int]:
    """Wait for ``proc``, stopping it on timeout or stall; its status, rusage, why it was
    stopped, its peak RSS (KiB) and most open fds; ``rss`` gets (seconds in, VmRSS KiB)."""
    hwm = fds = 0
    stopped, stop_at, size, moved = "", 0.0, -1, start
    while True:
        h, now_rss, f = _proc_status(proc.pid)
        hwm, fds = max(hwm, h), max(fds, f)
        if now_rss:
            rss.append((time.perf_counter() - start, now_rss))
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        now = time.perf_counter()
        grown = web_log.stat().st_size if web_log.exists() else 0
        if grown != size:
            size, moved = grown, now
        if not stopped and (now - start > timeout or now - moved > stall):
            stopped, stop_at = ("timeout" if now - start > timeout else "stalled"), now
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
        elif stopped and now - stop_at > grace:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.25)
    return status, rusage, stopped, hwm, fds


def run_watched(
    cmd: list[str],
    env: dict[str, str],
    out: Path,
    web_log: Path,
    timeout: float,
    stall: float,
    grace: float = 15,
    cwd: Path = ROOT,
) -> dict[str, Any]:
    """Run ``cmd`` to its end in ``cwd``; wall, CPU (rusage), peak RSS, most open fds, how it
    stopped.

    Stopped with SIGINT (then SIGKILL after ``grace`` s) after ``timeout`` s, or when the web
    log has not grown for ``stall`` s (``stopped: stalled``): a crawl that stops asking is stuck.
    ``python -m`` puts ``cwd`` first on the import path: another checkout's crawl runs there.
    """
    with open(out / "crawl.log", "wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        rss: list[tuple[float, int]] = []
        try:
            status, rusage, stopped, hwm, fds = _watch(
                proc, web_log, start, timeout, stall, grace, rss
            )
        except BaseException:  # interrupted: the crawl (its own session) must not outlive us
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: Popen must know
    return {
        "exit_code": proc.returncode,
        "stopped": stopped,
        "wall_s": wall,
        "cpu_s": rusage.ru_utime + rusage.ru_stime,
        "cpu_user_s": rusage.ru_utime,  # the kernel's share (loopback TCP, epoll) is the rest
        "peak_rss_mb": hwm / 1024,
        # at each tenth of the run: a rise to the end is what the crawl keeps of every host
        "rss_mb_by_tenth": [
            round(next((kb for t, kb in reversed(rss) if t <= wall * k / 10), 0) / 1024, 1)
            for k in range(1, 11)
        ],
        "open_fds_max": fds,
    }


class InternetProcess:
    """``python -m testweb.internet`` in a subprocess (in ``netns`` when given)."""

    def __init__(self, logdir: Path, args: list[str], netns: Namespace | None = None) -> None:
        self.logdir = logdir
        logdir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "testweb.internet", *args, "--logdir", str(logdir)]
        self.stderr = open(logdir / "server.stderr", "w")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = (
            netns.popen(
                argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env, cwd=ROOT
            )
            if netns is not None
            else subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=env, cwd=ROOT
            )
        )
        line = self._first_line()
        self.info: dict[str, Any] = json.loads(line)
        self.internet = Internet.from_params(self.info["params"])

    def _first_line(self) -> str:
        box: list[str] = []
        reader = threading.Thread(
            target=lambda: box.append(self.proc.stdout.readline() if self.proc.stdout else "")
        )
        reader.start()
        reader.join(START_TIMEOUT)
        if not box or not box[0]:
            self.stop()
            raise RuntimeError(
                "testweb.internet did not start: "
                + (self.logdir / "server.stderr").read_text()[-2000:]
            )
        return box[0]

    @property
    def ca(self) -> str:
        return str(self.info["ca"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.stderr.close()

    def __enter__(self) -> InternetProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class InternetThread(LoopThread):
    """DNS (at ``dns``, when given) and the web (http and https) for ``internet``, in a thread.

    Ports 0 in ``internet`` are replaced by the ones bound before ``start()`` returns. ``::1``
    (AAAA-only hosts) is left alone unless ``ipv6``: outside a namespace it is every process's.
    """

    name = "internet"
    start_timeout = START_TIMEOUT

    def __init__(
        self,
        internet: Internet,
        logdir: Path,
        *,
        dns: tuple[str, int] | None = None,
        latency: bool = True,
        ipv6: bool = False,
    ) -> None:
        self.internet = internet
        self.logdir = logdir
        logdir.mkdir(parents=True, exist_ok=True)
        self.ca = TestCA(logdir / "tls", internet.domain)
        self.web = WebServer(
            internet, tls=self.ca.default, log=str(logdir / "web.log"), latency=latency, ipv6=ipv6
        )
        self.dns = (
            DnsServer(internet, dns[0], dns[1], log=str(logdir / "dns.log"), latency=latency)
            if dns
            else None
        )
        super().__init__()

    async def _serve(self) -> None:
        if self.dns is not None:
            await self.dns.start()
        await self.web.start()

    def _close(self) -> None:
        self.web.close()
        if self.dns is not None:
            self.dns.close()
