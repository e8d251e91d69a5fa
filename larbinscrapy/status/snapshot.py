"""The status document (``GET /api/status``, the page, ``/metrics``): pure, from plain values.

``paused`` and ``stopping`` are this worker's; ``all_workers`` the last command asked of every
worker of a distributed crawl ("" before any, None without a shared frontier).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from larbinscrapy.status.history import BYTES, ITEMS, PAGES

# (key in the document, stats prefixes whose suffix is a reason or an error type)
GROUPS = (
    ("filtered", ("larbin/filtered/",)),
    ("dropped", ("larbin/dropped/",)),
    (
        "errors",
        (
            "larbin/errors/",
            "larbin/failed/",
            "downloader/exception_type_count/",
            "spider_exceptions/",
        ),
    ),
    ("status_codes", ("downloader/response_status_count/",)),
)

# Revisits (LARBIN_REVISIT): (label, stats key); "done" is the revisits fetched or failed.
_REVISIT = "larbin/revisit/"
REVISITS = (
    ("scheduled", "pending"),
    ("due", "due"),
    ("changed", "changed"),
    ("unchanged", "unchanged"),
    ("not modified", "not_modified"),
    ("server errors", "server_error"),
    ("failed", "failed"),
)
_DONE = ("changed", "unchanged", "server_error", "failed")  # not_modified is an unchanged

# Exception types that are deliberate drops, not errors (robots.txt, filters, the SSRF guard).
_NOT_ERRORS = ("IgnoreRequest", "DroppedRequest")


def group(stats: dict[str, Any], prefixes: tuple[str, ...]) -> dict[str, int]:
    """Numeric stats under ``prefixes`` by suffix (an exception's dotted path by class name);
    the same name under two prefixes is summed."""
    out: dict[str, int] = {}
    for key, value in stats.items():
        if not isinstance(value, int | float):
            continue
        for prefix in prefixes:
            if key.startswith(prefix):
                name = key[len(prefix) :].rsplit(".", 1)[-1]
                out[name] = out.get(name, 0) + int(value)
                break
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def json_safe(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, int | float | str | bool) or value is None:
        return value
    return str(value)


def _dns(stats: dict[str, Any], cached: int | None) -> dict[str, Any]:
    return {
        "lookups": stats.get("larbin/dns/lookups", 0),
        "failed": stats.get("larbin/dns/failures", 0),
        "cached": cached,
    }


def _seen(frontier: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """The seen-set's part: the scheduler's figures, else the dupefilter's last stats."""
    seen = dict(frontier.get("seen") or {})
    for name in ("fill_ratio", "estimated_fp_rate"):
        if seen.get(name) is None:
            seen[name] = stats.get(f"larbin/dupefilter/{name}")
    seen["filtered"] = stats.get("larbin/dupefilter/filtered", 0)
    return seen


def build_status(
    *,
    stats: dict[str, Any],
    frontier: dict[str, Any] | None,
    rates: dict[str, float],
    paused: bool,
    stopping: bool,
    uptime: float,
    busiest: list[tuple[str, int]],
    dns_cached: int | None,
    worker: str,
    all_workers: str | None = None,
) -> dict[str, Any]:
    """The whole status as one JSON-ready dict (see the module docstring)."""
    frontier = frontier or {}
    doc: dict[str, Any] = {
        "worker": worker,
        "pages": stats.get(PAGES, 0),
        "items": stats.get(ITEMS, 0),
        "bytes": stats.get(BYTES, 0),
        "queued": frontier.get("queued", 0),
        "rates": rates,
        "paused": paused,
        "stopping": stopping,
        "all_workers": all_workers,
        "uptime_s": round(uptime, 1),
        "frontier": {k: v for k, v in frontier.items() if k not in ("seen", "ips", "sites")},
        "sites": frontier.get("sites", {}),
        "ips": frontier.get("ips", {}),
        "dns": _dns(stats, dns_cached),
        "seen": _seen(frontier, stats),
        "busiest_hosts": [[host, n] for host, n in busiest],
    }
    for key, prefixes in GROUPS:
        doc[key] = group(stats, prefixes)
    for name in _NOT_ERRORS:  # drops on purpose (robots.txt, the SSRF guard): counted elsewhere
        doc["errors"].pop(name, None)
    doc["revisits"] = revisits(stats)
    doc["stats"] = {k: json_safe(v) for k, v in sorted(stats.items())}
    return doc


def revisits(stats: dict[str, Any]) -> dict[str, int]:
    """Pages scheduled, due (handed to the frontier) and done; empty without revisits."""
    if not any(key.startswith(_REVISIT) for key in stats):
        return {}
    out = {label: int(stats.get(_REVISIT + key, 0)) for label, key in REVISITS}
    return {
        "scheduled": out.pop("scheduled"),
        "due": out.pop("due"),
        "done": sum(int(stats.get(_REVISIT + key, 0)) for key in _DONE),
        **out,
    }
