"""Fixtures: the test web, a real redis-server, the ``crawl`` marker's check; helpers live in
``tests/support/``.

Importing this module installs Scrapy's asyncio reactor in the test process (Scrapy 2.19's
``get_crawler`` needs one), once for every test module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from scrapy.utils.reactor import install_reactor, is_reactor_installed

from tests.support.marks import CRAWL, enter_test
from tests.support.redisserver import redis_server
from testweb.harness import RunningWeb, start_web

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"

if not is_reactor_installed():
    install_reactor(ASYNCIO_REACTOR)


@pytest.fixture(autouse=True)
def _crawl_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a run that leaves crawl tests out, an unmarked test may not start a crawl or a server."""
    marked = request.node.get_closest_marker(CRAWL) is not None
    enter_test(marked, fast_loop=CRAWL in (request.config.option.markexpr or ""))
    yield
    enter_test(True, fast_loop=False)


@pytest.fixture
def web(tmp_path: Path) -> Iterator[RunningWeb]:
    """The default test web (about 200 pages on 10 loopback IPs), fresh request log."""
    with start_web(tmp_path / "web") as running:
        yield running


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A fresh redis-server for one test."""
    with redis_server(tmp_path / "redis") as url:
        yield url
