"""A real ``redis-server`` on a free loopback port, no persistence."""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from typing import TYPE_CHECKING

from tests.support.marks import require_crawl_marker
from tests.support.wait import wait_for
from testweb.harness import free_port

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """Start one in ``workdir``; yields its URL."""
    import redis

    require_crawl_marker("redis-server")
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)

    def answers() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            if proc.poll() is not None:
                raise
            return False

    try:
        wait_for(answers, 10, "redis-server to answer")
        yield url
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)
