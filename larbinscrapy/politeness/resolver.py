"""Asynchronous DNS on the crawl's reactor: c-ares (pycares) without a thread per lookup.

larbin used adns; c-ares is what adns became. The channel reads the system's resolver
configuration (``/etc/resolv.conf``: nameservers, ``options timeout:`` and ``attempts:``),
or asks ``LARBIN_DNS_SERVERS``; its sockets are watched by the Twisted reactor
(``sock_state_cb``), so every answer arrives in the reactor thread. c-ares retries truncated
UDP answers over TCP itself. CNAME chains are followed here (an authoritative server answers
a CNAME alone), at most ``max_cnames`` hops, a loop counted as ``cname_loop``; a name with no A
record is asked for AAAA (IPv6 when it has nothing else). A name's outcome is one of
``OUTCOMES``; ``DnsError.outcome`` carries it, nothing parses a message.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pycares
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IReadWriteDescriptor
from zope.interface import implementer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

# Bytes of a socket's receive buffer one answer datagram takes, with room: the kernel charges
# a datagram's whole buffer (~830 bytes on loopback for a 100-byte answer), not its payload.
_ANSWER_BUFFER = 2048
_RECEIVE_BUFFER_MIN = 256 * 1024

# Outcomes of a lookup (the ``larbin/dns/<outcome>`` stats).
ANSWERED = "answered"
NXDOMAIN = "nxdomain"  # the name does not exist (authoritative: not retried)
NODATA = "nodata"  # the name exists, with neither A nor AAAA (not retried)
SERVFAIL = "servfail"
REFUSED = "refused"
TIMEOUT = "timeout"
BAD_ANSWER = "bad_answer"  # a malformed or truncated answer c-ares could not use
CNAME_LOOP = "cname_loop"  # a CNAME chain that loops or is longer than the bound
BAD_NAME = "bad_name"  # not a DNS name: over 253 characters, an empty or 64+ label, bad IDN
ERROR = "error"  # anything else c-ares reports (no server, connection refused...)
# Outcomes a later try may change: retried with back-off before the name counts as failed.
MAX_NAME, MAX_LABEL = 253, 63  # RFC 1035, in characters without the final dot
TEMPORARY = frozenset({SERVFAIL, REFUSED, TIMEOUT, BAD_ANSWER, ERROR})

_ARES_OUTCOMES = {
    "ARES_ENOTFOUND": NXDOMAIN,
    "ARES_ENODATA": NODATA,
    "ARES_ESERVFAIL": SERVFAIL,
    "ARES_EREFUSED": REFUSED,
    "ARES_ETIMEOUT": TIMEOUT,
    "ARES_EBADRESP": BAD_ANSWER,
    "ARES_EFORMERR": BAD_ANSWER,
    "ARES_EBADNAME": BAD_NAME,
}


class DnsError(DNSLookupError):
    """A lookup that gave no address; ``outcome`` says why (one of the outcomes above)."""

    def __init__(self, name: str, outcome: str) -> None:
        super().__init__(f"{name}: {outcome}")
        self.name = name
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class Answer:
    """An address and how long it may be kept (the lowest TTL along the CNAME chain)."""

    ip: str
    ttl: float
    cnames: int = 0  # CNAME hops followed to reach it


def query_name(host: str) -> str:
    """``host`` as DNS asks for it (IDNs as punycode); ``DnsError(bad_name)`` if it is none.

    RFC 1035: at most 253 characters without the final dot, labels of 1 to 63.
    """
    name = host.rstrip(".")
    try:
        ascii_name = name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError:
        raise DnsError(host, BAD_NAME) from None
    labels = ascii_name.split(".")
    if (
        not ascii_name
        or len(ascii_name) > MAX_NAME
        or any(not 0 < len(x) <= MAX_LABEL for x in labels)
    ):
        raise DnsError(host, BAD_NAME)
    return ascii_name.lower()


def follow_chain(name: str, records: Sequence[Any], rtype: int) -> tuple[str, list[str], float]:
    """Walk ``name``'s CNAMEs in one answer: (final name, its addresses, lowest TTL seen).

    Raises ``DnsError(cname_loop)`` when the chain comes back to a name it passed.
    """
    cnames: dict[str, tuple[str, int]] = {}
    addresses: dict[str, list[tuple[str, int]]] = {}
    for rr in records:
        owner = rr.name.rstrip(".").lower()
        if rr.type == pycares.QUERY_TYPE_CNAME:
            cnames[owner] = (rr.data.cname.rstrip(".").lower(), rr.ttl)
        elif rr.type == rtype:
            addresses.setdefault(owner, []).append((rr.data.addr, rr.ttl))
    ttl = float("inf")
    seen = {name}
    while name in cnames and name not in addresses:
        name, hop_ttl = cnames[name]
        ttl = min(ttl, hop_ttl)
        if name in seen:
            raise DnsError(name, CNAME_LOOP)
        seen.add(name)
    found = addresses.get(name, [])
    for _, rr_ttl in found:
        ttl = min(ttl, rr_ttl)
    return name, [ip for ip, _ in found], ttl


@implementer(IReadWriteDescriptor)
class _AresSocket:
    """One of c-ares' sockets, watched by the reactor: ready means "let c-ares read/write"."""

    def __init__(self, channel: pycares.Channel, fd: int) -> None:
        self.channel = channel
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def doRead(self) -> None:
        self.channel.process_fd(self.fd, pycares.ARES_SOCKET_BAD)

    def doWrite(self) -> None:
        self.channel.process_fd(pycares.ARES_SOCKET_BAD, self.fd)

    def connectionLost(self, reason: Failure) -> None:  # c-ares owns and closes the socket
        pass

    def logPrefix(self) -> str:
        return "c-ares"


_FLUSH_EVERY = 4096  # answers between two emptyings of c-ares' own query cache


def _receive_buffer(in_flight: int) -> int:
    """Receive buffer for the channel's sockets, in bytes: room for every answer of
    ``in_flight`` lookups while the reactor thread is busy elsewhere.

    The kernel's default (``net.core.rmem_default``, 208 KB: ~256 answers) dropped the rest of
    a burst, and c-ares asked those names again a timeout later, into the next burst. The
    kernel grants at most ``net.core.rmem_max`` (docs/running.md, broad crawls).
    """
    return max(_RECEIVE_BUFFER_MIN, in_flight * _ANSWER_BUFFER)


class AresResolver:
    """``lookup(host) -> Deferred[Answer]`` through one c-ares channel on ``reactor``.

    ``servers`` empty: the system's configuration (``resolv.conf``, which also sets the
    timeout and attempts; ``timeout``/``tries`` override them when given).
    """

    def __init__(
        self,
        reactor: Any,
        *,
        servers: Sequence[str] = (),
        timeout: float | None = None,
        tries: int | None = None,
        max_cnames: int = 8,
        in_flight: int = 0,
    ) -> None:
        self._reactor = reactor
        self.max_cnames = max_cnames
        self._sockets: dict[int, _AresSocket] = {}
        self._timer: Any = None
        self._pending = 0  # queries c-ares has not answered yet
        self._answers = 0  # since c-ares' query cache was last emptied
        self._flush: Any = None  # the call that empties it, when due
        self.flushes = 0
        self.channel = pycares.Channel(
            flags=pycares.ARES_FLAG_NOSEARCH,
            timeout=timeout,
            tries=tries,
            servers=list(servers) or None,
            sock_state_cb=self._sock_state,
            socket_receive_buffer_size=_receive_buffer(in_flight),
        )

    def lookup(self, host: str) -> Deferred[Answer]:
        """The address of ``host``: A, else AAAA, CNAMEs followed; fails with ``DnsError``."""
        try:
            name = query_name(host)
        except DnsError as exc:
            return defer.fail(exc)
        d: Deferred[Answer] = defer.Deferred()
        self._ask(d, host, name, pycares.QUERY_TYPE_A, 0, float("inf"))
        return d

    def _ask(
        self, d: Deferred[Answer], host: str, name: str, rtype: int, hops: int, ttl: float
    ) -> None:
        def answered(result: Any, status: int | None) -> None:
            self._pending -= 1
            self._answers += 1
            if self._answers >= _FLUSH_EVERY and self._flush is None:  # not inside c-ares' call
                self._flush = self._reactor.callLater(0, self._flush_query_cache)
            try:
                self._answered(d, host, name, rtype, hops, ttl, result, status)
            except DnsError as exc:
                d.errback(exc)
            except Exception as exc:  # an answer this code did not expect: one line, no traceback
                logger.error("DNS answer for %s not understood: %r", host, exc)
                if not d.called:
                    d.errback(DnsError(host, ERROR))

        try:
            self.channel.query(name, rtype, callback=answered)
        except (pycares.AresError, ValueError, UnicodeError):  # a name c-ares will not send
            d.errback(DnsError(host, BAD_NAME))
            return
        self._pending += 1
        self._schedule_timer()

    def _answered(
        self,
        d: Deferred[Answer],
        host: str,
        name: str,
        rtype: int,
        hops: int,
        ttl: float,
        result: Any,
        status: int | None,
    ) -> None:
        if d.called:  # cancelled (the cache's own timeout)
            return
        if status is not None:
            outcome = _ARES_OUTCOMES.get(pycares.errno.errorcode.get(status, ""), ERROR)
            if outcome == NODATA and rtype == pycares.QUERY_TYPE_A:  # IPv6 only, perhaps
                self._ask(d, host, name, pycares.QUERY_TYPE_AAAA, hops, ttl)
                return
            raise DnsError(host, outcome)
        final, ips, chain_ttl = follow_chain(name, result.answer, rtype)
        ttl = min(ttl, chain_ttl)
        hops += sum(1 for rr in result.answer if rr.type == pycares.QUERY_TYPE_CNAME)
        if ips:
            d.callback(Answer(ips[0], ttl, hops))
            return
        if final == name and rtype == pycares.QUERY_TYPE_A:
            self._ask(d, host, name, pycares.QUERY_TYPE_AAAA, hops, ttl)
        elif final == name:
            raise DnsError(host, NODATA)
        elif hops > self.max_cnames:
            raise DnsError(host, CNAME_LOOP)
        else:  # the chain leaves the server's zone: ask for its target
            self._ask(d, host, final, rtype, hops, ttl)

    def _flush_query_cache(self) -> None:
        """Empty c-ares' own query cache: on by default since c-ares 1.23, it keeps every
        answer for its TTL (~1.1 KB a name: a gigabyte for a million hosts an hour), beside
        ``DnsCache``, which keeps what the crawl needs. pycares offers no option to turn it
        off; ``reinit`` empties it (and reads resolv.conf again); queries in flight go on."""
        self._flush, self._answers = None, 0
        try:
            self.channel.reinit()
        except pycares.AresError as exc:  # the old configuration stays: nothing lost
            logger.debug("c-ares reinit failed: %r", exc)
            return
        self.flushes += 1

    # -- c-ares' sockets and timer on the reactor ----------------------------------------------
    def _sock_state(self, fd: int, readable: bool, writable: bool) -> None:
        sock = self._sockets.get(fd)
        if sock is None:
            if not (readable or writable):
                return
            sock = self._sockets[fd] = _AresSocket(self.channel, fd)
        (self._reactor.addReader if readable else self._reactor.removeReader)(sock)
        (self._reactor.addWriter if writable else self._reactor.removeWriter)(sock)
        if not (readable or writable):
            del self._sockets[fd]

    def _schedule_timer(self) -> None:
        """Wake c-ares when its next timeout is due (a try to resend, a query to give up)."""
        if self._timer is not None and self._timer.active():
            return
        if self._pending:
            self._timer = self._reactor.callLater(self.channel.timeout() or 0.05, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.channel.process_fd(pycares.ARES_SOCKET_BAD, pycares.ARES_SOCKET_BAD)
        self._schedule_timer()

    def close(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if self._flush is not None and self._flush.active():
            self._flush.cancel()
        self._flush = None
        for sock in list(self._sockets.values()):
            self._reactor.removeReader(sock)
            self._reactor.removeWriter(sock)
        self._sockets.clear()
        self.channel.cancel()


def hosts_file(path: str = "/etc/hosts") -> dict[str, str]:
    """Names the system's hosts file pins (``localhost``...), first address each, read once."""
    pinned: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return pinned
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) < 2:  # noqa: PLR2004 (an address and at least one name)
            continue
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in fields[0] else socket.AF_INET, fields[0])
        except OSError:
            continue
        for name in fields[1:]:
            pinned.setdefault(name.lower(), fields[0])
    return pinned
