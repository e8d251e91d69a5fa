"""``RedisFrontier``: larbin's frontier kept in Redis, every step one atomic Lua script.

The Redis side of ``RedisScheduler``, with no Scrapy in it (tests drive it directly). It keeps
the local scheduler's semantics (``larbinscrapy/frontier/scheduler.py``) for many workers:

More in docs/modules.md ("Distributed mode").
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from larbinscrapy.distributed import lua
from larbinscrapy.distributed.jobs import Call, run_call, run_calls

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from redis import Redis

    from larbinscrapy.distributed.jobs import LuaScript

logger = logging.getLogger(__name__)

# A record whose URL is http(s) with a lower-case host: its site and host need not be stored.
_DERIVABLE = re.compile(rb'\["(https?)://([a-z0-9.\-]+)(?::([1-9][0-9]*))?[/?#"]').match
_DEFAULT_PORT = {b"http": b"80", b"https": b"443"}

TIERS = ("priority", "priority-overflow", "normal", "normal-overflow")
PRIORITY, NORMAL = 0, 2


def take_seeds_call(prefix: str, worker: str, start_key: str, n: int) -> Call:
    """Move up to ``n`` seeds from ``start_key`` to ``prefix:seeds:<worker>`` (pending until
    their requests are admitted). In a cluster ``prefix`` shares the start key's slot."""
    return Call.script_call(lua.TAKE_SEEDS, start_key, [prefix, worker, start_key, n], list)


def seeds_reap_call(prefix: str, worker: str, timeout: float, start_key: str) -> Call:
    """Cluster: the pending seeds of workers silent for ``timeout`` (or of ``worker`` itself,
    ``timeout`` < 0) go back to ``start_key``. Its result: the workers reaped."""
    ms = round(timeout * 1000) if timeout >= 0 else -1
    return Call.script_call(lua.SEEDS_REAP, start_key, [prefix, worker, ms, start_key], int)


def _first_int(reply: list[Any]) -> int:
    return int(reply[0])


def _two_ints(reply: list[Any]) -> tuple[int, int]:
    return int(reply[0]), int(reply[1])


def _resolved_reply(reply: list[Any]) -> tuple[str, int]:
    return reply[0].decode(), int(reply[1])


def _popped(reply: list[Any]) -> Popped:
    out, unresolved, wait, queued, dropped, to_wait, aside = reply
    return Popped(
        leases=[(lid.decode(), ip.decode(), rec) for lid, ip, rec in out],
        unresolved=[h.decode() for h in unresolved],
        wait=None if int(wait) < 0 else int(wait) / 1000,
        queued=int(queued),
        dropped=int(dropped),
        to_wait=int(to_wait),
        aside=int(aside),
    )


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class Released(NamedTuple):
    """What one ``release`` returned."""

    dropped: int  # records dropped with a dead IP (-1: the lease had been reaped)
    aside: int  # records dropped with the host set aside by this release (-1: not set aside)
    pause: float  # the shared back-off pause (s) this release started (0: none)


def _released(reply: list[Any]) -> Released:
    return Released(int(reply[0]), int(reply[1]), int(reply[2]) / 1000)


@dataclass(frozen=True, slots=True)
class Throttle:
    """The throttling settings the release applies to a host's run (``HostTable``'s)."""

    backoff: float = 0.0  # LARBIN_THROTTLE_BACKOFF
    max_backoff: float = 0.0  # LARBIN_THROTTLE_BACKOFF_MAX
    max_in_a_row: int = 0  # LARBIN_THROTTLE_IN_A_ROW_MAX (0: never set aside)


@dataclass(slots=True)
class Popped:
    """What one ``pop`` returned."""

    leases: list[tuple[str, str, bytes]] = field(default_factory=list)  # (lease id, ip, record)
    unresolved: list[str] = field(default_factory=list)  # hosts this worker should resolve
    wait: float | None = None  # seconds until the next IP is ready (None: no IP has work)
    queued: int = 0  # records queued in the whole frontier after the pop
    dropped: int = 0  # records of dead hosts dropped by the sequencer
    to_wait: int = 0  # records moved to a wait list (site at its cap)
    aside: int = 0  # records of hosts set aside dropped by the sequencer


class RedisFrontier:
    """The shared frontier's keys and atomic operations (see the module docstring)."""

    def __init__(
        self,
        server: Redis,
        prefix: str,
        *,
        max_per_site: int = 40,
        loaded_sites: int = 2000,
        connections: int = 1,
        refill_budget: int = 256,
        throttle: Throttle | None = None,
        hold: float = 0.0,
    ) -> None:
        self.server = server
        self.prefix = prefix
        self.max_per_site = max_per_site
        self.mem_limit = max(1, loaded_sites) * max_per_site
        self.connections = max(1, connections)
        self.refill_budget = refill_budget
        self.throttle = throttle or Throttle()
        # > 0: an IP has several connections and hosts a delay, so a host's fetch in flight is
        # marked (``P:hold:<host>``, for at most this long: the lease timeout) and not leased twice
        self.hold_ms = _ms(hold)
        self._pop = lua.POP
        self._release = lua.RELEASE
        self._giveback = lua.GIVEBACK
        self._resolved = lua.RESOLVED
        self._admit = lua.ADMIT
        self._reap = lua.REAP

    @staticmethod
    def entry(site: str, host: str, record: bytes) -> bytes:
        """A tier entry: the record alone when the scripts derive the same site and host from
        its URL (``split_entry``), else ``site \\t host \\t record``."""
        m = _DERIVABLE(record)
        if m is not None:
            scheme, name, port = m.groups()
            if name == host.encode() and site.encode() == b"%s://%s:%s" % (
                scheme,
                name,
                port or _DEFAULT_PORT[scheme],
            ):
                return record
        return f"{site}\t{host}\t".encode() + record

    def _call(self, script: LuaScript, args: list[Any], parse: Callable[[Any], Any]) -> Call:
        # The declared key routes the call to the shard's master. It is the counters' hash: a
        # key that exists from the first admit on, so while a reshard moves the slot the
        # script runs where the shard's keys are (a missing declared key sends it to the new
        # master before the keys got there). docs/distributed.md: reshard with a pipeline that
        # moves a slot's keys in one MIGRATE.
        return Call.script_call(script, f"{self.prefix}:count", [self.prefix, *args], parse)

    def admit_call(
        self,
        worker: str,
        seen_key: str,
        shard_bits: int,
        entries: list[tuple[int, list[int], bytes]],
        acks: Sequence[str] = (),
        seeds_done: bool = False,
    ) -> Call:
        """Test-and-set each entry's bits; queue the new ones; then ack ``acks``. Atomic.
        Its result: (new, filtered)."""
        args: list[Any] = [
            worker,
            seen_key,
            shard_bits,
            f"{self.prefix}:seeds:{worker}" if seeds_done else "",
            len(acks),
        ]
        for tier, positions, entry in entries:
            args += [tier, len(positions), *positions, entry]
        args += list(acks)
        return self._call(self._admit, args, _two_ints)

    def admit(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return cast("tuple[int, int]", run_call(self.server, self.admit_call(*args, **kwargs)))

    def pop_call(self, worker: str, want: int, first_lease: int) -> Call:
        """Lease up to ``want`` records (``Popped``)."""
        return self._call(
            self._pop,
            [
                worker,
                want,
                self.connections,
                self.mem_limit,
                self.max_per_site,
                self.refill_budget,
                first_lease,
                self.hold_ms,
            ],
            _popped,
        )

    def pop(self, worker: str, want: int, first_lease: int) -> Popped:
        return cast("Popped", run_call(self.server, self.pop_call(worker, want, first_lease)))

    def release_call(
        self,
        worker: str,
        ip: str,
        delay: float,
        dead: bool = False,
        *,
        host: str = "",
        host_delay: float = 0.0,
        outcome: str = "",
        jitter: float = 1.0,
    ) -> Call:
        """The fetch on ``ip`` ended: the IP is ready again ``delay`` s from now (Redis time),
        ``host`` (if named) ``host_delay`` s from now, and its throttling run follows
        ``outcome`` (``politeness.hosts``: ANSWERED, BACKOFF, RETRY_AFTER or ""; a back-off
        pause is lengthened by ``jitter``). Its result: ``Released``."""
        t = self.throttle
        return self._call(
            self._release,
            [
                worker,
                ip,
                _ms(delay),
                int(dead),
                self.connections,
                host,
                _ms(host_delay),
                outcome,
                _ms(t.backoff),
                _ms(t.max_backoff),
                t.max_in_a_row,
                repr(jitter),
                int(self.hold_ms > 0),
            ],
            _released,
        )

    def release(
        self, worker: str, ip: str, delay: float, dead: bool = False, **host: Any
    ) -> Released:
        return cast(
            "Released", run_call(self.server, self.release_call(worker, ip, delay, dead, **host))
        )

    def giveback_call(self, worker: str, lease: str, wait: float) -> Call:
        """Hand a leased record back (front of its site list) and free its IP connection, ready
        again ``wait`` s from now. Its result: 1, or 0 when the lease was reaped meanwhile."""
        return self._call(
            self._giveback, [worker, lease, max(0, round(wait * 1000)), self.connections], int
        )

    def resolved_call(self, host: str, ip: str | None, reason: str = "dns") -> Call:
        """Store ``host``'s IP (or its failure) and make its waiting sites servable."""
        return self._call(
            self._resolved, [host, ip or f"!{reason}", self.connections], _resolved_reply
        )

    def aside_call(self, host: str) -> Call:
        """Set ``host`` aside for every worker (throttling past the cap): its records go."""
        return self._call(lua.ASIDE, [host, self.connections], int)

    def take_call(self, worker: str, ip: str, host: str) -> Call:
        """Lease a connection on ``ip`` for a fetch from ``host`` outside the frontier (0), or
        the ms to wait (-1: all leased); given back by ``release_call`` as any lease."""
        return self._call(lua.TAKE, [worker, ip, self.connections, host, self.hold_ms], int)

    def resolved(self, host: str, ip: str | None, reason: str = "dns") -> tuple[str, int]:
        return cast("tuple[str, int]", run_call(self.server, self.resolved_call(host, ip, reason)))

    def heartbeat_call(self, worker: str, timeout: float, start_key: str) -> Call:
        """Record that ``worker`` lives; requeue the leases of workers silent for ``timeout``.
        Its result: (requeued, workers reaped). ``start_key`` "": pending seeds are not
        returned here (in a cluster the seed list is in another slot: ``seeds_reap_call``)."""
        return self._call(
            self._reap, [worker, round(timeout * 1000), self.connections, start_key], _two_ints
        )

    def heartbeat(self, worker: str, timeout: float, start_key: str) -> tuple[int, int]:
        return cast(
            "tuple[int, int]",
            run_call(self.server, self.heartbeat_call(worker, timeout, start_key)),
        )

    def retire_call(self, worker: str, start_key: str) -> Call:
        """A worker closes: its unacknowledged records go back, its IPs are freed."""
        return self._call(self._reap, [worker, -1, self.connections, start_key], _first_int)

    def retire(self, worker: str, start_key: str) -> int:
        return cast("int", run_call(self.server, self.retire_call(worker, start_key)))

    def take_seeds(self, worker: str, start_key: str, n: int) -> list[bytes]:
        return cast(
            "list[bytes]", run_call(self.server, take_seeds_call(self.prefix, worker, start_key, n))
        )

    def unresolved_call(self, n: int = 50) -> Call:
        """Hosts left waiting for DNS (by a worker that died while resolving)."""
        return Call(
            ("SRANDMEMBER", f"{self.prefix}:unresolved", n),
            lambda hosts: [h.decode() for h in hosts],
        )

    def unresolved(self, n: int = 50) -> list[str]:
        return cast("list[str]", run_call(self.server, self.unresolved_call(n)))

    def counts_call(self) -> Call:
        """(queued, leased) records of this frontier."""
        return Call(
            ("HMGET", f"{self.prefix}:count", "queued", "leased"),
            lambda r: (int(r[0] or 0), int(r[1] or 0)),
        )

    def workers_call(self) -> Call:
        return Call(("ZCARD", f"{self.prefix}:workers"), int)

    def status(self, start_key: str) -> dict[str, int]:
        """Queued and leased records, seeds not yet read, live workers."""
        (queued, leased), seeds, workers = run_calls(
            self.server, [self.counts_call(), Call(("LLEN", start_key), int), self.workers_call()]
        )
        return {"queued": queued, "leased": leased, "seeds": seeds, "workers": workers}

    def delete(self) -> int:
        """Remove every key of the frontier (a finished crawl with SCHEDULER_PERSIST off)."""
        keys = list(self.server.scan_iter(match=f"{self.prefix}:*", count=1000))
        for i in range(0, len(keys), 500):
            self.server.delete(*keys[i : i + 500])
        return len(keys)
