"""Compact request records for the disk frontier: what larbin stored per URL, not a pickle."""

from __future__ import annotations

import base64
import json
import pickle
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.misc import load_object

from larbinscrapy import meta as M
from larbinscrapy.lean.request import SafeUrlRequest

if TYPE_CHECKING:
    from collections.abc import Callable

# Positions in a record; every field from the meta on may be left out when it has its default.
_META, _CALLBACK, _ERRBACK, _METHOD, _BODY, _HEADERS, _EXTRA = range(2, 9)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_raw_decode = json.JSONDecoder().raw_decode
_TRANSIENT = M.TRANSIENT
_PLAIN = (Request, SafeUrlRequest)  # stored without a class: back as the crawl's request class
_BASE_ATTRIBUTES = frozenset(Request.attributes)
_classes: dict[str, type[Request]] = {}  # import path -> class, for decode
_WHERE = {M.CB_KWARGS: "cb_kwargs", M.FLAGS: "flags"}  # reserved keys, named for the user
# Flags of a packed meta: what a record holds once instead of twice.
_ADMITTED = 1  # the gate's mark equals the URL
_REFERER_FULL = 2  # the only header is Referer: the stored referer
_REFERER_ORIGIN = 4  # the only header is Referer: the stored referer's origin
_REFERER_ANY = _REFERER_FULL | _REFERER_ORIGIN
_DEPTHS = 2  # a packed meta's first two items, kept even when 0


class UnserializableRequest(ValueError):
    """The request cannot be stored: a callback that is not a method of the spider, a value
    JSON (or the allowed pickle) cannot hold, a class that cannot be rebuilt."""


def _method_name(func: Any, spider: Any) -> str | None:
    if func is None:
        return None
    name = getattr(func, "__name__", None)
    if getattr(func, "__self__", None) is spider and name:
        return name
    raise UnserializableRequest(f"callback {func!r} is not a method of the spider")


def encode(request: Request, spider: Any, *, allow_pickle: bool = False) -> bytes:
    meta = request.meta
    kept = {k: v for k, v in meta.items() if k not in _TRANSIENT}
    # Request attributes that are not meta ride in the meta object under reserved keys.
    if request.dont_filter:
        kept[M.DONT_FILTER] = 1
    if request.cb_kwargs:
        kept[M.CB_KWARGS] = request.cb_kwargs
    if request.flags:
        kept[M.FLAGS] = request.flags
    flags = _ADMITTED if meta.get(M.ADMITTED) == request.url else 0
    if request.headers:
        flags |= _referer_flag(kept.get(M.REFERER), request.headers)
    head = [request.url, request.priority]
    callbacks = [_method_name(request.callback, spider), _method_name(request.errback, spider)]
    plain = type(request) in _PLAIN and not request.cookies and request.encoding == "utf-8"
    extra = None if plain else _extra(request)
    rest = [request.method, request.body.decode("latin-1"), _headers(request), extra]
    folded = request.method == "GET" and not request.body and not extra
    folded = folded and (not request.headers or bool(flags & _REFERER_ANY))
    if not folded:  # the headers are stored as they are
        flags &= ~_REFERER_ANY
    rec = [*head, _packed(request.url, kept, flags), *callbacks, *([] if folded else rest)]
    try:
        record = _dumps(_trimmed(rec)).encode()
    except (TypeError, ValueError):  # a value JSON cannot hold: find it, pickle it if allowed
        if flags & _ADMITTED:  # the plain layout: the meta as a dict, the headers as they are
            kept[M.ADMITTED] = 1
        rec = _trimmed([*head, kept, *callbacks, *rest])
        record = _dumps(_held_by_pickle(rec, kept, allow_pickle)).encode()
    if extra and "cls" in extra:
        _check_rebuilt(record, spider)
    return record


def _trimmed(rec: list[Any]) -> list[Any]:
    """``rec`` without its trailing defaults (a record is read by position)."""
    while rec[-1] is None or (rec[-1] == {} and len(rec) > _CALLBACK):
        rec.pop()
    return rec


def _headers(request: Request) -> dict[str, list[str]]:
    return {
        k.decode("latin-1"): [v.decode("latin-1") for v in vs] for k, vs in request.headers.items()
    }


def _origin_end(url: str) -> int:
    """Where ``scheme://host:port`` ends in ``url`` (its path's ``/``, or the end)."""
    end = url.find("/", url.find("//") + 2)
    return len(url) if end < 0 else end


def _referer_flag(referer: Any, headers: Any) -> int:
    """The Referer header when it is the only header and follows from the stored referer:
    the referer itself, or its origin (what the referer policies send across origins)."""
    if type(referer) is not str or len(headers) != 1:
        return 0
    sent = headers.getlist(b"Referer")
    if len(sent) != 1:
        return 0
    if sent[0] == referer.encode("latin-1", "replace"):
        return _REFERER_FULL
    if sent[0] == (referer[: _origin_end(referer)] + "/").encode("latin-1", "replace"):
        return _REFERER_ORIGIN
    return 0


def _packed(url: str, kept: dict[str, Any], flags: int) -> Any:
    """The meta as stored: ``[depth, site depth, referer, flags, {other keys}]`` (trailing
    defaults left out), or the plain dict when it holds none of the gate's fields.

    The referer is written from its path when it shares the URL's origin (a page's links mostly
    do), and once: the Referer header it explains is a flag."""
    rest = dict(kept)
    fields: list[Any] = [None, None, None]
    if type(kept.get("depth")) is int:
        fields[0] = rest.pop("depth")
    if type(kept.get(M.SITE_DEPTH)) is int:
        fields[1] = rest.pop(M.SITE_DEPTH)
    if type(kept.get(M.REFERER)) is str:
        fields[2] = _relative(url, rest.pop(M.REFERER))
    if fields == [None, None, None] and not flags:
        return kept
    packed = [*fields, flags, rest]
    while len(packed) > _DEPTHS and packed[-1] in (None, 0, {}):  # 0 is a depth: they stay
        packed.pop()
    return packed


def _relative(url: str, referer: Any) -> Any:
    if type(referer) is not str:
        return referer
    end = _origin_end(url)
    if referer[:end] == url[:end] and referer[end : end + 1] == "/":
        return referer[end:]
    return referer


def _unpacked(url: str, packed: list[Any]) -> tuple[dict[str, Any], int]:
    """The meta and the flags of a packed meta list (``_packed``'s inverse)."""
    packed = packed + [None] * (5 - len(packed))
    depth, site_depth, referer, flags, rest = packed
    meta: dict[str, Any] = {}
    if depth is not None:
        meta["depth"] = depth
    if site_depth is not None:
        meta[M.SITE_DEPTH] = site_depth
    if referer is not None:
        meta[M.REFERER] = url[: _origin_end(url)] + referer if referer[:1] == "/" else referer
    if rest:
        meta.update(rest)
    return meta, flags or 0


def _extra(request: Request) -> dict[str, Any] | None:
    """What a plain request does not carry: its class and own attributes, cookies, encoding."""
    extra: dict[str, Any] = {}
    cls = type(request)
    if cls not in _PLAIN:
        extra["cls"] = f"{cls.__module__}.{cls.__qualname__}"
        own = {a: getattr(request, a) for a in cls.attributes if a not in _BASE_ATTRIBUTES}
        if own:
            extra["attrs"] = own
    if request.cookies:
        extra["cookies"] = request.cookies
    if request.encoding != "utf-8":
        extra["encoding"] = request.encoding
    return extra or None


def _held_by_pickle(rec: list[Any], kept: dict[str, Any], allow_pickle: bool) -> list[Any]:
    """``rec`` with the meta values JSON cannot hold pickled, or the error naming the first."""
    for key, value in list(kept.items()):
        try:
            _dumps(value)
        except (TypeError, ValueError) as exc:
            where = _WHERE.get(key) or f"meta[{key!r}]"
            if not allow_pickle:
                raise UnserializableRequest(f"{where}: {exc}") from exc
            try:
                raw = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as pexc:  # pickle raises many types for what it cannot hold
                raise UnserializableRequest(f"{where}: {pexc}") from pexc
            del kept[key]
            kept.setdefault(M.PICKLED, {})[key] = base64.b64encode(raw).decode("ascii")
    try:
        _dumps(rec)
    except (TypeError, ValueError) as exc:  # not the meta: cookies or a class attribute
        raise UnserializableRequest(f"{rec[0]}: {exc}") from exc
    return rec


def _check_rebuilt(record: bytes, spider: Any) -> None:
    """A class not ours must be rebuilt from what is stored: try it now, not at pop time."""
    try:
        decode(record, spider)
    except Exception as exc:  # a user's __init__ may raise anything
        raise UnserializableRequest(f"cannot rebuild the request from its record: {exc!r}") from exc


def decode(data: bytes, spider: Any, request_cls: type[Request] = Request) -> Request:
    rec = json.loads(data)
    url, priority = rec[0], rec[1]
    meta = rec[_META] if len(rec) > _META else {}
    flags = 0
    if type(meta) is list:  # packed: the gate's fields first (records before it: a dict)
        meta, flags = _unpacked(url, meta)
    pickled = meta.pop(M.PICKLED, None)
    if pickled:  # the user allowed pickle (LARBIN_FRONTIER_PICKLE) when it was written
        for key, raw in pickled.items():
            meta[key] = pickle.loads(base64.b64decode(raw))
    if meta.pop(M.ADMITTED, None) or flags & _ADMITTED:
        meta[M.ADMITTED] = url
    kwargs: dict[str, Any] = {
        "dont_filter": bool(meta.pop(M.DONT_FILTER, False)),
        "cb_kwargs": meta.pop(M.CB_KWARGS, None),
        "flags": meta.pop(M.FLAGS, None),
    }
    callback = getattr(spider, rec[_CALLBACK]) if len(rec) > _CALLBACK and rec[_CALLBACK] else None
    errback = getattr(spider, rec[_ERRBACK]) if len(rec) > _ERRBACK and rec[_ERRBACK] else None
    cls: Callable[..., Request] = request_cls
    if len(rec) > _METHOD:  # trailing defaults were left out: a POST may have no body or headers
        kwargs["method"] = rec[_METHOD]
        if len(rec) > _BODY:
            kwargs["body"] = rec[_BODY].encode("latin-1")
        if len(rec) > _HEADERS:
            kwargs["headers"] = rec[_HEADERS]
        if len(rec) > _EXTRA:
            cls = _apply_extra(rec[_EXTRA], kwargs, request_cls)
    if flags & _REFERER_ANY:
        referer = meta[M.REFERER]
        if flags & _REFERER_ORIGIN:
            referer = referer[: _origin_end(referer)] + "/"
        kwargs["headers"] = {"Referer": referer}
    return cls(url, priority=priority, meta=meta, callback=callback, errback=errback, **kwargs)


def _apply_extra(
    extra: dict[str, Any], kwargs: dict[str, Any], plain: type[Request]
) -> Callable[..., Request]:
    if "cookies" in extra:
        kwargs["cookies"] = extra["cookies"]
    if "encoding" in extra:
        kwargs["encoding"] = extra["encoding"]
    kwargs.update(extra.get("attrs", ()))
    path = extra.get("cls")
    if path is None:
        return plain
    cls = _classes.get(path)
    if cls is None:
        cls = _classes[path] = load_object(path)
    return cls


def url_of(data: bytes) -> str:
    """The URL of a record without decoding the rest (the sequencer only needs the site)."""
    return _raw_decode(data.decode(), 1)[0]
