"""The simulated internet's authoritative DNS server (UDP, and TCP for truncated answers).

Answers every name from ``Internet`` (``model.py``): A for IPv4 hosts, AAAA ``::1`` for the
AAAA-only ones (IPv6 has one loopback address, so they all share it), CNAME chains
``h{i} -> c1-h{i}.cdn -> ... -> address``, the name's own TTL, NXDOMAIN (with the zone's SOA),
SERVFAIL, and silence for names that never answer. An answer bigger than 512 bytes (or the
client's EDNS size) goes over UDP with only the header, question and TC bit, so the client asks
again over TCP. Each answer is delayed by the name's latency with ``loop.call_later`` (no
thread, no sleep). Every query is one line of ``dns.log`` (``logs.py``).

In a test: ``with DnsThread(internet, "127.100.0.1", 0) as dns: dns.port``; in an asyncio
program: ``server = DnsServer(internet, address, port); await server.start()``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from dnslib import AAAA, CNAME, EDNS0, QTYPE, RCODE, RR, SOA, A, DNSError, DNSHeader, DNSRecord  # type: ignore[import-untyped]

from testweb.internet.logs import LineLog
from testweb.internet.loopthread import LoopThread

if TYPE_CHECKING:
    from testweb.internet.model import Internet

logger = logging.getLogger(__name__)

UDP_MAX = 512  # without EDNS (RFC 1035)
NEG_TTL = 300  # the SOA minimum: how long a resolver may cache NXDOMAIN/NODATA (RFC 2308)
BIND_ATTEMPTS = 20


def dns_address(base: str) -> str:
    """The DNS server's default address: in the last /16 of the /14 range starting at ``base``."""
    a, b, _, _ = (int(x) for x in base.split("."))
    return f"{a}.{b + 3}.255.53"


class Answer:
    """What to send for one query: a reply, or nothing (``reply`` None), after ``delay`` s."""

    __slots__ = ("delay", "reply", "summary")

    def __init__(self, reply: DNSRecord | None, delay: float, summary: str) -> None:
        self.reply = reply
        self.delay = delay
        self.summary = summary


def answer(internet: Internet, query: DNSRecord) -> Answer:
    """The authoritative answer to ``query`` (its first question)."""
    reply = DNSRecord(
        DNSHeader(id=query.header.id, qr=1, aa=1, ra=0, rd=query.header.rd), q=query.q
    )
    qname = str(query.q.qname).rstrip(".").lower()
    qtype = query.q.qtype
    parsed = internet.parse_name(qname)
    if parsed is None:
        return Answer(_negative(internet, reply, RCODE.NXDOMAIN), 0.0, "NXDOMAIN")
    host, _kind, step = parsed
    if host.dns == "silent":
        return Answer(None, host.dns_delay, "DROP")
    if host.dns != "ok":
        rcode = RCODE.NXDOMAIN if host.dns == "nxdomain" else RCODE.SERVFAIL
        if rcode == RCODE.SERVFAIL:
            reply.header.rcode = rcode
        else:
            _negative(internet, reply, rcode)
        return Answer(reply, host.dns_delay, host.dns.upper())
    name, ttl = qname, host.ttl
    for s in range(step + 1, host.cname + 1):  # the rest of the chain, as one zone answers it
        target = f"c{s}-h{host.index}.cdn.{internet.domain}"
        reply.add_answer(RR(name, QTYPE.CNAME, ttl=ttl, rdata=CNAME(target)))
        name = target
        if qtype == QTYPE.CNAME:
            return Answer(reply, host.dns_delay, "CNAME=" + target)
    wanted = {QTYPE.A: "4", QTYPE.AAAA: "6"}.get(qtype, "any" if qtype == QTYPE.ANY else "")
    if wanted in (host.family, "any"):
        for addr in host.addresses:
            rdata = AAAA(addr) if host.family == "6" else A(addr)
            rtype = QTYPE.AAAA if host.family == "6" else QTYPE.A
            reply.add_answer(RR(name, rtype, ttl=ttl, rdata=rdata))
        return Answer(reply, host.dns_delay, host.addresses[0])
    _negative(internet, reply, RCODE.NOERROR)
    return Answer(reply, host.dns_delay, "NODATA")


def _negative(internet: Internet, reply: DNSRecord, rcode: int) -> DNSRecord:
    """NXDOMAIN or NODATA with the zone's SOA, whose minimum is the negative TTL."""
    reply.header.rcode = rcode
    zone = internet.domain
    soa = SOA(f"ns.{zone}", f"hostmaster.{zone}", (1, 3600, 600, 86400, NEG_TTL))
    reply.add_auth(RR(zone, QTYPE.SOA, ttl=NEG_TTL, rdata=soa))
    return reply


def _edns_size(query: DNSRecord) -> int:
    for rr in query.ar:
        if rr.rtype == QTYPE.OPT:
            return max(UDP_MAX, int(rr.rclass))
    return UDP_MAX


def pack_udp(query: DNSRecord, reply: DNSRecord) -> tuple[bytes, bool]:
    """The reply's bytes over UDP (the header and question with TC when it does not fit), and
    whether it was truncated."""
    size = _edns_size(query)
    if size > UDP_MAX:
        reply.add_ar(EDNS0(udp_len=size))
    data: bytes = reply.pack()
    if len(data) > size:
        short = DNSRecord(
            DNSHeader(id=reply.header.id, qr=1, aa=1, tc=1, rd=query.header.rd), q=query.q
        )
        return short.pack(), True
    return data, False


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        query, got = self.server.handle(data)
        if query is None or got is None:
            return
        if got.reply is None:
            self.server.record("udp", query, got.summary)
            return
        payload, truncated = pack_udp(query, got.reply)
        self.server.record("udp", query, "TC" if truncated else got.summary)
        self.server.later(got.delay, self._send, payload, addr)

    def _send(self, payload: bytes, addr: tuple[str, int]) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(payload, addr)


class _Tcp(asyncio.Protocol):
    """DNS over TCP: each message framed by a two-byte length (RFC 1035 4.2.2)."""

    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 2:
            size = int.from_bytes(self.buffer[:2], "big")
            if len(self.buffer) < 2 + size:
                return
            message, self.buffer = self.buffer[2 : 2 + size], self.buffer[2 + size :]
            query, got = self.server.handle(message)
            if query is not None and got is not None:
                self.server.record("tcp", query, got.summary)
            if got is not None and got.reply is not None:
                data = got.reply.pack()
                self.server.later(got.delay, self._send, len(data).to_bytes(2, "big") + data)

    def _send(self, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(payload)


class DnsServer:
    """The DNS server on ``address:port`` (UDP and TCP on the same port; 0 = any free one)."""

    def __init__(
        self,
        internet: Internet,
        address: str,
        port: int = 53,
        *,
        log: str | LineLog | None = None,
        latency: bool = True,
    ) -> None:
        self.internet = internet
        self.address = address
        self.port = port
        self.latency = latency
        self.log = log if isinstance(log, LineLog) else LineLog(log)
        self._own_log = not isinstance(log, LineLog)
        self.queries = 0
        self.malformed = 0
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> tuple[str, int]:
        """Listen on UDP and TCP; returns ``(address, port)``."""
        self._loop = loop = asyncio.get_running_loop()
        error: OSError | None = None
        for _ in range(BIND_ATTEMPTS if self.port == 0 else 1):
            udp, _ = await loop.create_datagram_endpoint(
                lambda: _Udp(self), local_addr=(self.address, self.port)
            )
            port = udp.get_extra_info("sockname")[1]
            try:
                self._tcp = await loop.create_server(lambda: _Tcp(self), self.address, port)
            except OSError as exc:
                udp.close()
                error = exc
                continue
            self._udp, self.port = udp, port
            return self.address, port
        assert error is not None
        raise error

    def later(self, delay: float, fn: Any, *args: Any) -> None:
        assert self._loop is not None
        if self.latency and delay > 0:
            self._loop.call_later(delay, fn, *args)
        else:
            fn(*args)

    def handle(self, data: bytes) -> tuple[DNSRecord | None, Answer | None]:
        try:
            query = DNSRecord.parse(data)
        except (DNSError, ValueError, IndexError):
            self.malformed += 1
            return None, None
        if not query.questions:
            self.malformed += 1
            return query, None
        self.queries += 1
        return query, answer(self.internet, query)

    def record(self, proto: str, query: DNSRecord, summary: str) -> None:
        name = str(query.q.qname).rstrip(".").lower() or "."
        self.log.write(proto, "".join(name.split()) or ".", QTYPE.get(query.q.qtype), summary)

    def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
        if self._own_log:
            self.log.close()
        else:
            self.log.flush()


class DnsThread(LoopThread):
    """A ``DnsServer`` on its own asyncio loop in a background thread: for tests in any reactor.

    ``with DnsThread(internet, "127.100.0.1", 0, log=path) as dns: ... dns.port``.
    """

    name = "internet-dns"

    def __init__(self, internet: Internet, address: str, port: int = 0, **kwargs: Any) -> None:
        self.server = DnsServer(internet, address, port, **kwargs)
        super().__init__()

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def port(self) -> int:
        return self.server.port

    async def _serve(self) -> None:
        await self.server.start()

    def _close(self) -> None:
        self.server.close()
