"""The host level of politeness: per-hostname delays, throttling answers, the bandwidth cap
(pure: the clock is passed in).

Per-host state is bounded: past ``resident_max`` hosts (``LARBIN_HOST_RESIDENT_MAX``) the table
evicts the oldest ones nothing holds (no fetch open, no caller keeping the object): a host
whose state is that of a new one (its delay over, no pause, no back-off, no Crawl-delay...) is
forgotten, any other is kept packed in a few dozen bytes (``_PACKED``, not seen by the cyclic
garbage collector) and comes back intact when asked for again.
"""

from __future__ import annotations

import random
import struct
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

THROTTLED = "throttled"  # drop reason: the host asked for more than LARBIN_THROTTLE_RETRY_AFTER_MAX
SILENT = "silent"  # drop reason: the host never answered within LARBIN_HOST_SILENT_TIMEOUT
JITTER = 0.1  # back-off pauses are lengthened by up to this fraction, so workers do not align
# How a fetch from a host ended, for a listener that keeps the host's throttling run elsewhere
# (the Redis frontier): "" says nothing about the run (a failure, nothing sent).
ANSWERED = "a"  # a normal answer: the run ends
BACKOFF = "b"  # a throttling answer without Retry-After: the back-off doubles
RETRY_AFTER = "t"  # a throttling answer with Retry-After: counted in the run


def parse_retry_after(value: str | bytes | None, wall_now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (RFC 9110 §10.2.3), or None if unusable.

    ``wall_now`` is the Unix time the answer arrived: an HTTP-date is relative to it.
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text:
        return None
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is read as such
        return None
    return max(0.0, when.timestamp() - wall_now)


@dataclass(slots=True)
class HostState:
    """One hostname: when it may be fetched next, its own delays, its throttling state."""

    host: str
    busy: int = 0
    ready_at: float = 0.0  # end of the last fetch + the host's delay
    crawl_delay: float = 0.0  # robots.txt Crawl-delay, capped
    adaptive_delay: float = 0.0  # AutoThrottle's current delay for this host
    paused_until: float = 0.0  # a throttling answer's pause
    backoff: float = 0.0  # the current back-off without Retry-After; 0 = not backing off
    # asked for a pause past LARBIN_THROTTLE_RETRY_AFTER_MAX, or throttles only
    set_aside: bool = False
    throttled: int = 0  # throttling answers received
    in_a_row: int = 0  # throttling answers since its last normal answer
    # an HTTP answer came (since the host was last made resident: not packed, so an evicted
    # host is timed as a new one again), and the host was set aside for never answering
    heard: bool = False
    silent: bool = False


# ready_at, crawl_delay, adaptive_delay, paused_until, backoff, set_aside, silent, throttled,
# in_a_row
_PACKED = struct.Struct("<5d??II")
_UNHELD = 3  # references to a host state in _evict: the table's, the loop's, getrefcount's
RESIDENT_MAX = 10_000  # the default of LARBIN_HOST_RESIDENT_MAX


def pack(hs: HostState, now: float) -> bytes | None:
    """``hs`` in ``_PACKED`` bytes; None when it is a new host's state at ``now``."""
    ready_at = hs.ready_at if hs.ready_at > now else 0.0
    paused_until = hs.paused_until if hs.paused_until > now else 0.0
    fields = (
        ready_at,
        hs.crawl_delay,
        hs.adaptive_delay,
        paused_until,
        hs.backoff,
        hs.set_aside,
        hs.silent,
        hs.throttled,
        hs.in_a_row,
    )
    if not any(fields):
        return None
    return _PACKED.pack(*fields)


def unpack(host: str, packed: bytes) -> HostState:
    ready_at, crawl, adaptive, paused, backoff, aside, silent, throttled, in_a_row = _PACKED.unpack(
        packed
    )
    return HostState(
        host,
        0,
        ready_at,
        crawl,
        adaptive,
        paused,
        backoff,
        aside,
        throttled,
        in_a_row,
        silent=silent,
    )


class HostTable:
    """Per-hostname politeness state, bounded (module docstring)."""

    def __init__(
        self,
        delay: float,
        *,
        max_connections: int = 1,
        max_crawl_delay: float,
        max_retry_after: float,
        throttle_backoff: float,
        max_backoff: float,
        max_in_a_row: int = 0,
        silent_timeout: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        rng: Callable[[], float] = random.random,
        resident_max: int = RESIDENT_MAX,
    ) -> None:
        self.default_delay = delay
        self.silent_timeout = silent_timeout
        self.max_connections = max(1, max_connections)
        self.max_crawl_delay = max_crawl_delay
        self.max_retry_after = max_retry_after
        self.throttle_backoff = throttle_backoff
        self.max_backoff = max_backoff
        self.max_in_a_row = max_in_a_row
        self.clock = clock
        self.rng = rng
        self.resident_max = max(1, resident_max)
        self.hosts: dict[str, HostState] = {}  # resident, oldest first
        self.packed: dict[str, bytes] = {}  # evicted hosts whose state is not a new host's
        self.created = 0  # host states made new (a host forgotten and back counts again)
        self.evicted = 0
        # the resident count past which hosts are evicted: the cap, or further when the last
        # eviction found too few hosts nothing holds (so those are not walked per new host)
        self._evict_at = self.resident_max

    def get(self, host: str) -> HostState:
        hs = self.hosts.get(host)
        if hs is None:
            packed = self.packed.pop(host, None)
            if packed is None:
                hs = HostState(host)
                self.created += 1
            else:
                hs = unpack(host, packed)
            self.hosts[host] = hs
            if len(self.hosts) > self._evict_at:
                self._evict()
        return hs

    def _evict(self) -> None:
        """Evict the oldest hosts nothing holds, down to three quarters of the cap; if too
        many are held for that, the next eviction waits for a quarter of the cap more."""
        now = self.clock()
        excess = len(self.hosts) - self.resident_max * 3 // 4
        hosts, packed = self.hosts, self.packed
        for host in list(hosts):
            if excess <= 0:
                break
            hs = hosts[host]
            if hs.busy or sys.getrefcount(hs) > _UNHELD:  # held across a wait
                continue
            del hosts[host]
            excess -= 1
            self.evicted += 1
            state = pack(hs, now)
            if state is not None:
                packed[host] = state
        self._evict_at = max(self.resident_max, len(hosts) + self.resident_max // 4)

    def delay(self, hs: HostState) -> float:
        return max(self.default_delay, hs.crawl_delay, hs.adaptive_delay)

    def next_start(self, host: str) -> float:
        """When (clock time) the next fetch from ``host`` may start."""
        hs = self.hosts.get(host)
        if hs is not None:
            return max(hs.ready_at, hs.paused_until)
        packed = self.packed.get(host)
        if packed is None:
            return 0.0
        fields = _PACKED.unpack(packed)
        return max(fields[0], fields[3])

    def full(self, hs: HostState) -> bool:
        """Every connection the host may have (``CONCURRENT_REQUESTS_PER_DOMAIN``) is in use."""
        return hs.busy >= self.max_connections

    def start(self, hs: HostState) -> None:
        hs.busy += 1

    def finish(self, hs: HostState, *, release: bool) -> None:
        """A fetch from ``hs`` ended: the host's delay runs from now."""
        if release:
            hs.busy = max(0, hs.busy - 1)
        hs.ready_at = max(hs.ready_at, self.clock() + self.delay(hs))

    def set_crawl_delay(self, hs: HostState, seconds: float) -> None:
        """Apply a robots.txt Crawl-delay; a pause already started (robots.txt's own) grows too."""
        before = self.delay(hs)
        hs.crawl_delay = max(hs.crawl_delay, min(max(0.0, seconds), self.max_crawl_delay))
        if hs.ready_at > 0:
            hs.ready_at = max(hs.ready_at + self.delay(hs) - before, 0.0)

    def set_adaptive_delay(self, hs: HostState, seconds: float) -> None:
        """AutoThrottle's delay for the host; ``delay`` keeps DOWNLOAD_DELAY as the floor."""
        hs.adaptive_delay = max(0.0, seconds)

    # -- throttling answers ---------------------------------------------------------------------
    def throttle(self, hs: HostState, retry_after: float | None) -> float | None:
        """A throttling answer from ``hs``: pause it; return the pause, None if set aside.

        ``retry_after`` is the parsed header (seconds) or None: then the back-off doubles.
        """
        hs.throttled += 1
        hs.in_a_row += 1
        hs.heard = True
        if self.max_in_a_row and hs.in_a_row >= self.max_in_a_row:
            # A host that answers nothing but throttling would hold a one-pass crawl open for ever.
            hs.set_aside = True
            return None
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                hs.set_aside = True
                return None
            pause = retry_after
        else:
            hs.backoff = (
                self.throttle_backoff if hs.backoff <= 0 else min(hs.backoff * 2, self.max_backoff)
            )
            pause = hs.backoff * (1 + JITTER * self.rng())
        self.pause(hs, pause)
        return pause

    def pause(self, hs: HostState, seconds: float) -> None:
        """No fetch from ``hs`` starts for ``seconds`` (a longer pause already set holds)."""
        hs.paused_until = max(hs.paused_until, self.clock() + seconds)

    def answered(self, hs: HostState) -> None:
        """A normal answer: the back-off starts again from its base next time."""
        hs.backoff = 0.0
        hs.in_a_row = 0
        hs.heard = True

    # -- hosts that never answer ------------------------------------------------------------
    def first_answer_timeout(self, hs: HostState) -> float | None:
        """The page timeout of a fetch from a host never heard from (``silent_timeout``), or
        None: the host answered once, or the rule is off.

        A host that accepts connections and never answers would hold its IP's connection,
        shared with every other name on the address, for the whole page timeout, try after try.
        """
        if self.silent_timeout <= 0 or hs.heard:
            return None
        return self.silent_timeout

    def timed_out(self, hs: HostState) -> bool:
        """A fetch timed out under ``first_answer_timeout``: set the host aside as silent (its
        other URLs are dropped before they reach the network). True if it was just set aside."""
        if hs.heard or hs.set_aside or self.silent_timeout <= 0:
            return False
        hs.set_aside = hs.silent = True
        return True

    def gauges(self, now: float) -> dict[str, int]:
        """Hostnames seen (``created``), resident, packed, fetching, cooling (delay), throttled
        (paused) and set aside (the last four of resident hosts)."""
        counts = {
            "seen": self.created,
            "resident": len(self.hosts),
            "packed": len(self.packed),
            "active": 0,
            "cooling": 0,
            "throttled": 0,
            "set_aside": 0,
        }
        for hs in self.hosts.values():
            if hs.set_aside:
                counts["set_aside"] += 1
            elif hs.busy:
                counts["active"] += 1
            elif hs.paused_until > now:
                counts["throttled"] += 1
            elif hs.ready_at > now:
                counts["cooling"] += 1
        return counts


class Bandwidth:
    """A crawl-wide byte budget (larbin waitbandwidth): when the next fetch may start.

    ``rate`` 0 turns it off. Each start reserves the largest body seen so far, and ``received``
    settles the reservation with the real size: the long-run rate is the cap, and the starts
    of many ready sites cannot land in the same second. Until the first body is known one
    fetch runs at a time. Fetches the budget holds go in turn (``take``): the first to wait
    goes first, else the timers of many waiters race for each opening and a site can wait
    while the others take every one.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self.ready_at = 0.0
        self.largest = 0  # the largest body received so far; 0 = none yet
        self._probing = False  # the first fetch is out, its size unknown
        self._issued = 0  # turns handed out (``take``)
        self._serving = 0  # the turn that goes next
        self._given_up: set[int] = set()  # turns not yet reached whose holder went away

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def wait(self, now: float, turn: int | None = None) -> float | None:
        """Seconds until the budget lets a fetch start; None until the first body is known.

        Without a ``turn``, more than 0 while fetches wait in turn (the caller takes one);
        with one, an estimate for the turns before it (the caller looks again then).
        """
        if not self.enabled:
            return 0.0
        if self._probing:
            return None
        free_in = max(0.0, self.ready_at - now)
        if turn is None:
            if self._serving == self._issued:
                return free_in
            turn = self._issued  # behind every waiting turn
        ahead = turn - self._serving - sum(1 for t in self._given_up if t < turn)
        if ahead <= 0:
            return free_in
        return free_in + max(ahead * self.largest / self.rate, 0.001)

    def take(self) -> int:
        """A place in line for a fetch that waits for the budget alone."""
        self._issued += 1
        return self._issued - 1

    def give_up(self, turn: int) -> None:
        """The holder of ``turn`` waits for something else now (or went away): skip it."""
        if turn >= self._serving:
            self._given_up.add(turn)
            self._next()

    def _next(self) -> None:
        while self._serving in self._given_up:
            self._given_up.discard(self._serving)
            self._serving += 1

    def start(self, turn: int | None = None) -> float:
        """A fetch starts (with its ``turn``, if it waited): reserve bytes for it; return the
        reservation (for ``received``)."""
        if not self.enabled:
            return 0.0
        if turn is not None and turn == self._serving:
            self._serving += 1
            self._next()
        if not self.largest:
            self._probing = True
            return 0.0
        self.ready_at = max(self.ready_at, self.clock()) + self.largest / self.rate
        return float(self.largest)

    def received(self, nbytes: int, reserved: float) -> None:
        """The fetch's body arrived (``nbytes``): settle what ``start`` reserved."""
        if not self.enabled:
            return
        if self._probing and not reserved:
            self._probing = False
            self.ready_at = max(self.ready_at, self.clock())
        self.largest = max(self.largest, nbytes)
        self.ready_at += (nbytes - reserved) / self.rate
