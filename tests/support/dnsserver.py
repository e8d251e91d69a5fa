"""A small DNS server whose zone a test writes, for the resolver's unit tests (dnslib).

The simulated internet's server (``testweb/internet/dns.py``) answers from its generator, and
the tests use it for what the generator makes; this one is for what a generated web has no
place for: CNAME loops, REFUSED, NODATA, a name whose address changes mid-test, a server that
stops answering, names of a given length.

UDP and TCP on one loopback address, both on the same port (port 0: the system picks one).
The zone is a dict the test may change while the server runs: ``name -> Name`` (A, AAAA,
CNAME, TTL, an rcode, silence, answers lost for a while, truncation over UDP, a delay).
Names not in the zone get NXDOMAIN. ``stopped`` makes the whole server silent (a resolver
that stops answering). Queries are counted per (name, type).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import socketserver
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dnslib import AAAA, CNAME, QTYPE, RCODE, RR, A, DNSRecord


@dataclass
class Name:
    """What the server answers for one name."""

    a: list[str] = field(default_factory=list)
    aaaa: list[str] = field(default_factory=list)
    cname: str = ""
    ttl: int = 300
    rcode: str = ""  # "SERVFAIL", "REFUSED", "NXDOMAIN"...
    silent: bool = False
    truncate: bool = False  # over UDP: TC set and no records (the client asks again over TCP)
    delay: float = 0.0
    alone: bool = False  # a CNAME answered alone (its target in another zone), not the chain
    lost_for: float = 0.0  # unanswered this long after its first query (a resolver that loses)


class DnsServer:
    """The server; ``with DnsServer(zone) as dns: dns.address`` is ``(ip, port)``."""

    def __init__(self, zone: dict[str, Name], ip: str = "127.24.0.1", port: int = 0) -> None:
        self.zone = zone
        self.stopped = False
        self.queries: Counter[tuple[str, str]] = Counter()
        self.first_asked: dict[str, float] = {}  # name -> when it was first asked (monotonic)
        self.order: list[str] = []  # names in the order they were answered
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, Any]] = []  # (when, tie-break, send): delayed answers
        self._due_changed = threading.Condition()
        self._seq = itertools.count()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((ip, port))
        self.address = self.udp.getsockname()
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                sock = self.request
                size = sock.recv(2)
                if len(size) < 2:
                    return
                data = sock.recv(struct.unpack("!H", size)[0])
                reply = server.answer(data, tcp=True)
                if reply is not None:
                    sock.sendall(struct.pack("!H", len(reply)) + reply)

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.tcp = socketserver.ThreadingTCPServer(self.address, Handler)
        self.tcp.daemon_threads = True
        self._threads = [
            threading.Thread(target=self._serve_udp, daemon=True),
            threading.Thread(target=self._send_due, daemon=True),
            threading.Thread(target=self.tcp.serve_forever, args=(0.05,), daemon=True),
        ]

    def __enter__(self) -> DnsServer:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.tcp.shutdown()
        self.tcp.server_close()
        self.udp.close()

    @property
    def server(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    def _serve_udp(self) -> None:
        while True:
            try:
                data, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self._reply_later(data, peer)

    def _reply_later(self, data: bytes, peer: Any) -> None:
        def send() -> None:
            reply = self.answer(data, tcp=False)
            if reply is not None:
                with contextlib.suppress(OSError):  # the server is closing
                    self.udp.sendto(reply, peer)

        spec = self._spec(data)
        delay = spec.delay if spec is not None else 0.0
        if delay:
            with self._due_changed:
                heapq.heappush(self._due, (time.monotonic() + delay, next(self._seq), send))
                self._due_changed.notify()
        else:
            send()

    def _send_due(self) -> None:
        """Send delayed answers when due (one thread, whatever the number of them)."""
        while True:
            with self._due_changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    wait = self._due[0][0] - time.monotonic() if self._due else None
                    self._due_changed.wait(wait)
                _, _, send = heapq.heappop(self._due)
            send()

    def _spec(self, data: bytes) -> Name | None:
        try:
            return self.zone.get(str(DNSRecord.parse(data).q.qname).rstrip(".").lower())
        except Exception:
            return None

    def answer(self, data: bytes, *, tcp: bool) -> bytes | None:
        """The reply to one query, or None to stay silent."""
        request = DNSRecord.parse(data)
        qname = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        with self._lock:
            self.queries[(qname, qtype)] += 1
            first = self.first_asked.setdefault(qname, time.monotonic())
        spec = self.zone.get(qname)
        lost = spec is not None and time.monotonic() - first < spec.lost_for
        if self.stopped or (spec is not None and spec.silent) or lost:
            return None
        reply = request.reply()
        if spec is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif spec.rcode:
            reply.header.rcode = getattr(RCODE, spec.rcode)
        elif spec.truncate and not tcp:
            reply.header.tc = 1
        else:
            self._add_chain(reply, qname, qtype)
        with self._lock:
            self.order.append(qname)
        return reply.pack()

    def _add_chain(self, reply: DNSRecord, name: str, qtype: str) -> None:
        """The records of ``name``: its CNAME chain within the zone (as an authoritative
        server gives it, a loop cut where it repeats), then the addresses at its end."""
        seen: set[str] = set()
        spec = self.zone.get(name)
        while spec is not None and name not in seen:
            seen.add(name)
            if spec.cname:
                reply.add_answer(RR(name, QTYPE.CNAME, ttl=spec.ttl, rdata=CNAME(spec.cname)))
                if spec.alone:
                    return
                name = spec.cname.rstrip(".").lower()
                spec = self.zone.get(name)
                continue
            for ip in spec.a if qtype == "A" else spec.aaaa if qtype == "AAAA" else []:
                rdata = A(ip) if qtype == "A" else AAAA(ip)
                reply.add_answer(RR(name, getattr(QTYPE, qtype), ttl=spec.ttl, rdata=rdata))
            return
