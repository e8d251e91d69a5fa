"""The ``crawl`` marker: tests that start a subprocess crawl or an outside server (redis-server,
nginx, scrapyd, chromium). ``make test-fast`` (``-m "not crawl"``) leaves them out, so when the
fast loop runs, a helper that starts one in an unmarked test fails at once instead of slowing it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

CRAWL = "crawl"
_unmarked = [False]  # True while an unmarked test runs in a session that deselects crawl tests


def enter_test(marked: bool, fast_loop: bool) -> None:
    """Called by conftest's autouse fixture around each test."""
    _unmarked[0] = fast_loop and not marked


def require_crawl_marker(what: str) -> None:
    """Fail the fast loop's test that starts ``what`` without ``@pytest.mark.crawl``."""
    if _unmarked[0]:
        raise AssertionError(f"{what} in a test without @pytest.mark.crawl (make test-fast)")


def server_params(variants: list[str], needs_server: Callable[[str], bool]) -> list[Any]:
    """Fixture params, those that start a server marked ``crawl`` (the others stay fast)."""
    return [pytest.param(v, marks=pytest.mark.crawl) if needs_server(v) else v for v in variants]
