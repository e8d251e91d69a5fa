"""Compact request records for the disk frontier: what larbin stored per URL, not a pickle."""

from __future__ import annotations

import json
from typing import Any

from scrapy import Request

from larbinscrapy import meta as M

PERSIST_META = (
    "depth",
    M.SITE_DEPTH,
    M.REFERER,
    M.PRIORITY,
    "dont_obey_robotstxt",
    "redirect_times",
    "redirect_ttl",
    "redirect_urls",
    "retry_times",
    "download_timeout",
    M.REVISIT,
    M.REVISIT_HINT,
)
# Positions in a record; every field from the meta on may be left out when it has its default.
_META, _CALLBACK, _ERRBACK, _METHOD, _BODY, _HEADERS = range(2, 8)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_raw_decode = json.JSONDecoder().raw_decode


class UnserializableRequest(ValueError):
    """The request has a callback that is not a method of the spider."""


def _method_name(func: Any, spider: Any) -> str | None:
    if func is None:
        return None
    name = getattr(func, "__name__", None)
    if getattr(func, "__self__", None) is spider and name:
        return name
    raise UnserializableRequest(f"callback {func!r} is not a method of the spider")


def encode(request: Request, spider: Any) -> bytes:
    meta = request.meta
    kept = {k: meta[k] for k in PERSIST_META if k in meta}
    if meta.get(M.ADMITTED) == request.url:
        kept[M.ADMITTED] = 1
    # Request attributes that are not meta ride in the meta object under reserved keys.
    if request.dont_filter:
        kept[M.DONT_FILTER] = 1
    if request.cb_kwargs:
        kept[M.CB_KWARGS] = request.cb_kwargs
    if request.flags:
        kept[M.FLAGS] = request.flags
    rec: list[Any] = [
        request.url,
        request.priority,
        kept,
        _method_name(request.callback, spider),
        _method_name(request.errback, spider),
    ]
    if request.method != "GET" or request.body or request.headers:
        headers = {
            k.decode("latin-1"): [v.decode("latin-1") for v in vs]
            for k, vs in request.headers.items()
        }
        rec += [request.method, request.body.decode("latin-1"), headers]
    while rec[-1] is None or (rec[-1] == {} and len(rec) > _CALLBACK):
        rec.pop()
    try:
        return _dumps(rec).encode()
    except (TypeError, ValueError) as exc:  # a kept meta value JSON cannot hold
        raise UnserializableRequest(f"{request!r}: {exc}") from exc


def decode(data: bytes, spider: Any, request_cls: type[Request] = Request) -> Request:
    rec = json.loads(data)
    url, priority = rec[0], rec[1]
    meta = rec[_META] if len(rec) > _META else {}
    if meta.pop(M.ADMITTED, None):
        meta[M.ADMITTED] = url
    kwargs: dict[str, Any] = {
        "dont_filter": bool(meta.pop(M.DONT_FILTER, False)),
        "cb_kwargs": meta.pop(M.CB_KWARGS, None),
        "flags": meta.pop(M.FLAGS, None),
    }
    callback = getattr(spider, rec[_CALLBACK]) if len(rec) > _CALLBACK and rec[_CALLBACK] else None
    errback = getattr(spider, rec[_ERRBACK]) if len(rec) > _ERRBACK and rec[_ERRBACK] else None
    if len(rec) > _METHOD:  # trailing defaults were left out: a POST may have no body or headers
        kwargs["method"] = rec[_METHOD]
        if len(rec) > _BODY:
            kwargs["body"] = rec[_BODY].encode("latin-1")
        if len(rec) > _HEADERS:
            kwargs["headers"] = rec[_HEADERS]
    return request_cls(
        url, priority=priority, meta=meta, callback=callback, errback=errback, **kwargs
    )


def url_of(data: bytes) -> str:
    """The URL of a record without decoding the rest (the sequencer only needs the site)."""
    return _raw_decode(data.decode(), 1)[0]
