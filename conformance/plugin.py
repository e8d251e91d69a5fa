"""The pytest plugin of ``make conformance`` (``-p conformance.plugin``).

It points Scrapy's test modules (``suites.py``) at our classes when pytest imports them:
module-level names rebound, each test class replaced by a subclass of the same name with the
suite's attributes, ``get_crawler`` given the suite's settings. It deselects the tests of
``excluded.txt`` (each with its reason; an entry that matches nothing is an error, so the list
cannot go stale) and the classes a suite does not choose. Name lookups outside loopback fail
(``socket.gaierror``), so no test reaches the network.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import ipaddress
import socket
from pathlib import Path
from typing import Any

import pytest
from scrapy.utils.misc import load_object

from conformance.suites import SUITES, Suite

EXCLUDED = Path(__file__).with_name("excluded.txt")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _loopback_only(lookup: Any) -> Any:
    @functools.wraps(lookup)
    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host or "localhost")
        try:
            loopback = ipaddress.ip_address(name.strip("[]")).is_loopback
        except ValueError:
            loopback = name.lower().rstrip(".") in _LOOPBACK_NAMES
        if not loopback:
            raise socket.gaierror(socket.EAI_NONAME, f"conformance: no lookup of {name}")
        return lookup(host, *args, **kwargs)

    return guarded


socket.getaddrinfo = _loopback_only(socket.getaddrinfo)
socket.gethostbyname = _loopback_only(socket.gethostbyname)


def read_excluded(path: Path = EXCLUDED) -> dict[str, str]:
    """``node id -> reason`` from the list file (``node id  # reason`` a line)."""
    excluded = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        nodeid, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise pytest.UsageError(f"{path}:{number}: an exclusion needs '# reason'")
        excluded[nodeid.strip()] = reason.strip()
    return excluded


def _suite_of(path: Path) -> Suite | None:
    for suite in SUITES:
        if path.as_posix().endswith(suite.module):
            return suite
    return None


def _with_settings(get_crawler: Any, extra: dict[str, Any]) -> Any:
    @functools.wraps(get_crawler)
    def wrapped(
        spidercls: Any = None,
        settings_dict: dict[str, Any] | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        return get_crawler(spidercls, {**extra, **(settings_dict or {})}, *args, **kwargs)

    wrapped._conformance = True  # type: ignore[attr-defined]
    return wrapped


def point_at_ours(module: Any, suite: Suite) -> None:
    """Rebind ``module``'s names and test classes as ``suite`` says."""
    for name, path in suite.bind.items():
        if not hasattr(module, name):
            raise pytest.UsageError(f"{suite.module}: no name {name} to rebind")
        setattr(module, name, load_object(path))
    if suite.settings:
        for owner in (module, *map(importlib.import_module, suite.helpers)):
            if hasattr(owner, "get_crawler") and not getattr(
                owner.get_crawler, "_conformance", False
            ):
                owner.get_crawler = _with_settings(owner.get_crawler, suite.settings)
    chosen = set(suite.classes) if suite.classes is not None else None
    found = set()
    for name, obj in list(vars(module).items()):
        if not (isinstance(obj, type) and name.startswith("Test")) or inspect.isabstract(obj):
            continue  # pytest collects no abstract class: keep Scrapy's abstract bases so
        found.add(name)
        if suite.class_attrs and (chosen is None or name in chosen):
            attrs = {**suite.class_attrs, "__module__": module.__name__, "__qualname__": name}
            setattr(module, name, type(name, (obj,), attrs))
    if chosen is not None and chosen - found:
        raise pytest.UsageError(f"{suite.module}: no test class {sorted(chosen - found)}")


class _OursModule(pytest.Module):
    suite: Suite

    def _getobj(self) -> Any:
        module = super()._getobj()
        point_at_ours(module, self.suite)
        return module


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    suite = _suite_of(module_path)
    if suite is None:
        return None
    node = _OursModule.from_parent(parent, path=module_path)
    node.suite = suite
    return node


def _chosen(item: pytest.Item) -> bool:
    suite = _suite_of(Path(str(item.path)))
    if suite is None or suite.classes is None:
        return True
    cls = item.cls.__name__ if item.cls is not None else None
    return cls in suite.classes


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    excluded = read_excluded()
    matched: set[str] = set()
    keep, drop = [], []
    for item in items:
        hits = [
            n
            for n in excluded
            if item.nodeid == n
            or item.nodeid.startswith(n + "::")
            or item.nodeid.startswith(n + "[")
        ]
        matched.update(hits)
        (drop if hits or not _chosen(item) else keep).append(item)
    stale = set(excluded) - matched
    if stale:
        raise pytest.UsageError(f"{EXCLUDED.name}: matches no test: {sorted(stale)}")
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
