"""What one fetch tells the schedule (pure): changed or not, the validators, the next due time."""

from __future__ import annotations

from email.utils import formatdate
from typing import TYPE_CHECKING, Any

from larbinscrapy.pipelines.contentdup import content_hash, simhash
from larbinscrapy.revisit.entry import ERROR, GONE, MAX_ETAG, SIMHASH, Entry
from larbinscrapy.revisit.rule import freshness, http_date

if TYPE_CHECKING:
    from larbinscrapy.revisit.rule import RevisitRule

NOT_MODIFIED = 304
GONE_STATUSES = frozenset((404, 410))  # a page that is not there: its own, slower back-off
SERVER_ERROR = 500  # and above: the server failed; each one in a row multiplies the wait
_STREAK_MAX = 127  # what the packed entry keeps of a count
_NO_DIGEST = b"\0" * 8


def digest_of(body: bytes, near_distance: int) -> tuple[bytes, int]:
    """(8-byte digest, flags) of a body: its simhash with near duplicates on, else its hash."""
    if near_distance:
        sim = simhash(body)
        if sim:
            return sim.to_bytes(8, "little"), SIMHASH
    digest = content_hash(body)
    return (digest[:8] if digest else _NO_DIGEST), 0


def differs(old: Entry, digest: bytes, flags: int, near_distance: int) -> bool:
    if old.flags & SIMHASH and flags & SIMHASH:
        distance = int.from_bytes(old.digest, "little") ^ int.from_bytes(digest, "little")
        return distance.bit_count() > near_distance
    return old.digest != digest or old.flags != flags


def conditional_headers(entry: Entry) -> dict[str, bytes]:
    """``If-None-Match`` / ``If-Modified-Since`` for a revisit of ``entry``."""
    headers = {}
    if entry.etag:
        headers["If-None-Match"] = entry.etag
    if entry.last_modified:
        headers["If-Modified-Since"] = formatdate(entry.last_modified, usegmt=True).encode()
    return headers


def observe(
    entry: Entry | None,
    *,
    fp: bytes,
    url: str,
    status: int,
    body: bytes,
    headers: Any,
    now: float,
    rule: RevisitRule,
    near_distance: int,
    hint: float | None = None,
    depth: int = 0,
    site_depth: int = 0,
    gone: float | None = None,
) -> tuple[Entry, bool]:
    """The page's next entry and whether it changed (a first fetch counts as changed).

    ``gone``: seconds a 404/410 page waits (None: such answers follow the rule like any page).
    """
    etag, last_modified = _validators(headers)
    fresh = freshness(
        headers.get(b"Cache-Control"), headers.get(b"Expires"), headers.get(b"Date"), now
    )
    if gone is not None and status in GONE_STATUSES:
        return _gone(entry, fp, url, now, rule, gone, depth, site_depth)
    if status >= SERVER_ERROR:
        return _server_error(entry, fp, url, now, rule, depth, site_depth), entry is None
    if entry is not None and entry.flags & GONE:  # back after a 404: the rule starts over
        entry = entry.evolve(interval=rule.first(), streak=0)
    if entry is not None and entry.flags & ERROR:  # back after 5xx: the rule starts over, the
        entry = entry.evolve(
            interval=rule.first(),
            streak=0,  # content compared with the last
            flags=entry.flags & ~ERROR,
        )  # good one
    if entry is None:
        digest, flags = digest_of(body, near_distance)
        interval = rule.first(hint if hint is not None else fresh)
        due = now + rule.wait(interval, fresh)
        new = Entry(
            fp, url, due, interval, 0, 1, digest, flags, last_modified, etag, depth, site_depth
        )
        return new, True
    return _refetched(entry, status, body, near_distance, etag, last_modified, rule, now, fresh)


def _refetched(
    entry: Entry,
    status: int,
    body: bytes,
    near_distance: int,
    etag: bytes,
    last_modified: int,
    rule: RevisitRule,
    now: float,
    fresh: float | None,
) -> tuple[Entry, bool]:
    """The next entry of a page fetched before: a 304 keeps its digest, else the body decides."""
    if status == NOT_MODIFIED:
        changed, digest, flags = False, entry.digest, entry.flags
        etag, last_modified = etag or entry.etag, last_modified or entry.last_modified
    else:
        digest, flags = digest_of(body, near_distance)
        changed = differs(entry, digest, flags, near_distance)
    interval, streak = rule.update(entry.interval, entry.streak, changed)
    new = entry.evolve(
        due=now + rule.wait(interval, fresh),
        interval=interval,
        streak=streak,
        fetch_count=entry.fetch_count + 1,
        digest=digest,
        flags=flags,
        etag=etag,
        last_modified=last_modified,
    )
    return new, changed


def _validators(headers: Any) -> tuple[bytes, int]:
    """The answer's ETag (empty when absurdly long) and Last-Modified (0: none or unreadable)."""
    etag = headers.get(b"ETag") or b""
    if len(etag) > MAX_ETAG:
        etag = b""
    modified = http_date(headers[b"Last-Modified"]) if headers.get(b"Last-Modified") else None
    return etag, int(modified) if modified and modified > 0 else 0


def _gone(
    entry: Entry | None,
    fp: bytes,
    url: str,
    now: float,
    rule: RevisitRule,
    gone: float,
    depth: int,
    site_depth: int,
) -> tuple[Entry, bool]:
    """The next entry of a page that answered 404/410: its own back-off, no digest."""
    if entry is None:
        new = Entry(fp, url, now + gone, gone, 0, 1, _NO_DIGEST, GONE, 0, b"", depth, site_depth)
        return new, True
    was_gone = bool(entry.flags & GONE)
    interval = min(entry.interval * rule.factor, max(gone, rule.maximum)) if was_gone else gone
    new = entry.evolve(
        due=now + interval,
        interval=interval,
        streak=0,
        fetch_count=entry.fetch_count + 1,
        digest=_NO_DIGEST,
        flags=GONE,
        etag=b"",
        last_modified=0,
    )
    return new, not was_gone


def _server_error(
    entry: Entry | None,
    fp: bytes,
    url: str,
    now: float,
    rule: RevisitRule,
    depth: int,
    site_depth: int,
) -> Entry:
    """The next entry of a page that answered 5xx: a longer wait each time, ``streak`` counting
    the answers in a row (the caller drops the page after its bound); the last good content
    and validators kept, so a page back to normal is compared with what it was."""
    if entry is None:
        interval = rule.first()
        return Entry(
            fp, url, now + interval, interval, 1, 1, _NO_DIGEST, ERROR, 0, b"", depth, site_depth
        )
    errors = min(_STREAK_MAX, (entry.streak if entry.flags & ERROR else 0) + 1)
    interval = rule.clamp(entry.interval * rule.factor)
    return entry.evolve(
        due=now + interval,
        interval=interval,
        streak=errors,
        fetch_count=entry.fetch_count + 1,
        flags=entry.flags | ERROR,
    )
