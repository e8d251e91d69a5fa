"""TLS for the lean handler: one client TLS creator per site, its sessions resumed.

Scrapy's handler asks its context factory for a new TLS creator on every request, each with its
own OpenSSL context, so no session is ever resumed. Here the same factory, built as Scrapy's
handler builds it (so Scrapy's TLS settings mean what they mean there), is asked once per
(host, port), and the site's newest session is offered to each new handshake. With Scrapy's own
factory all sites share the first one's OpenSSL context (its trust store loaded once, not per
site); each site's creator keeps SNI and the certificate's name check for its own name.
``TLSConnection`` is ``http1conn.Connection`` over Twisted's TLS transport; it keeps the peer
certificate for ``Response.certificate``. Details: docs/https.md, docs/modules.md (lean/).
Stats: ``larbin/tls/handshakes`` (TLS handshakes completed), ``larbin/tls/resumed`` (those that
resumed a session). Private names: ``OpenSSL.SSL._lib.SSL_session_reused`` (no public call tells
a resumed session), ``Connection._verify_helper`` and Twisted's ``_tlsShutdownFinished``: no TLS
connection leaves its state to the cyclic collector (docs/modules.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from OpenSSL.SSL import _lib  # type: ignore[attr-defined]
from scrapy.core.downloader.contextfactory import (
    _load_context_factory_from_settings,
    _ScrapyClientContextFactory,
)
from twisted.internet._sslverify import ClientTLSOptions
from twisted.internet.interfaces import IHandshakeListener, IOpenSSLClientConnectionCreator
from twisted.internet.protocol import connectionDone
from twisted.internet.ssl import Certificate
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from zope.interface import implementer

from larbinscrapy.lean.http1conn import Connection, ConnectionOwner

if TYPE_CHECKING:
    from OpenSSL import SSL
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

# Sites whose TLS state is kept, the least recently connected to forgotten first: a context can
# hold a whole trust store (with verification on), and a broad crawl meets millions of sites.
MAX_SITES = 4096


@implementer(IOpenSSLClientConnectionCreator)
class TLSSite:
    """One site's TLS: the creator its context factory gave once, and its newest session."""

    def __init__(self, creator: Any, stats: Any) -> None:
        self.creator = creator
        self.stats = stats
        self.session: SSL.Session | None = None

    def clientConnectionForTLS(self, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
        conn: SSL.Connection = self.creator.clientConnectionForTLS(tlsProtocol)
        if self.session is not None:
            try:
                conn.set_session(self.session)
            except ValueError:  # a factory that makes a context per connection: nothing to resume
                self.session = None
        return conn

    def handshake_done(self, conn: SSL.Connection) -> None:
        self.stats.inc_value("larbin/tls/handshakes")
        if _lib.SSL_session_reused(conn._ssl):
            self.stats.inc_value("larbin/tls/resumed")

    def keep_session(self, conn: SSL.Connection) -> None:
        session = conn.get_session()
        if session is not None:
            self.session = session


class TLSSites:
    """The TLS state of every https site the handler connected to, keyed by (host, port)."""

    def __init__(self, crawler: Crawler) -> None:
        self.factory: Any = _load_context_factory_from_settings(crawler)
        self.stats = crawler.stats
        self._sites: dict[tuple[str, int], TLSSite] = {}
        # Scrapy's factory makes the same context for every site: the first creator's is shared
        self._shared: ClientTLSOptions | None = None

    def site(self, host: str, port: int) -> TLSSite:
        """The TLS of ``host``: its creator asked of the context factory on first use only
        (or again once ``MAX_SITES`` others were connected to since)."""
        sites = self._sites
        site = sites.pop((host, port), None)
        if site is None:
            site = TLSSite(self._creator(host, port), self.stats)
            if len(sites) >= MAX_SITES:
                del sites[next(iter(sites))]
        sites[host, port] = site  # the most recent last
        return site

    def _creator(self, host: str, port: int) -> Any:
        """``host``'s creator: on the shared context, or the factory's own (another factory)."""
        shared = self._shared
        if shared is not None:
            return type(shared)(shared._createConnection, host)
        creator = self.factory.creatorForNetloc(host.encode("ascii"), port)
        if type(self.factory) is _ScrapyClientContextFactory and isinstance(
            creator, ClientTLSOptions
        ):
            self._shared = creator
        return creator


def _drop_verify_callback(handle: SSL.Connection) -> None:
    """The certificate is checked: drop its verify callback now, not when the connection goes.

    pyOpenSSL's verify helper and its C callback name each other, and hold Twisted's hostname
    check (closures, the service id): a cycle a handshake that only a full collection would
    free. A renegotiation later is still verified by OpenSSL against the trust store.
    """
    helper = getattr(handle, "_verify_helper", None)
    handle.set_verify(handle.get_verify_mode(), None)
    if helper is not None:
        helper.callback = None  # the helper's cycle broken: freed by reference counting


class _TLSProtocol(TLSMemoryBIOProtocol):
    """Twisted's TLS layer without the reference cycle a connection's TLS error leaves.

    ``_flushReceiveBIO`` makes the failure of a TLS error (a server's close without
    ``close_notify`` is one) in a local variable: its traceback holds that frame, the frame
    the failure, and with the frames every object of the connection, its OpenSSL state
    included, until a full collection. Stringified once handled, they go by reference
    counting. Private name overridden: ``TLSMemoryBIOProtocol._tlsShutdownFinished``
    (``http1.py``'s ``REQUIRES``).
    """

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        # a verify callback Scrapy's TLS options set and replaced at once (pyOpenSSL's
        # helper, a cycle) still names this protocol: let it hold neither the socket's objects
        # nor the factory's (nothing reads them once the connection is lost)
        self.transport = None
        self.factory = None  # type: ignore[assignment]

    def _tlsShutdownFinished(self, reason: Failure | None) -> None:
        try:
            super()._tlsShutdownFinished(reason)
        finally:
            if reason is not None:
                reason.cleanFailure()


class TLSFactory(TLSMemoryBIOFactory):
    """``TLSMemoryBIOFactory`` building ``_TLSProtocol``."""

    protocol = _TLSProtocol


@implementer(IHandshakeListener)
class TLSConnection(Connection):
    """A ``Connection`` over TLS: the peer certificate kept, the session saved when idle."""

    wired = False  # a request written before the handshake is done waits in TLS (``wire_ready``)

    def __init__(self, site: TLSSite, owner: ConnectionOwner) -> None:
        super().__init__(owner)
        self.site = site
        self.certificate: Certificate | None = None
        self._saved = False

    def handshakeCompleted(self) -> None:
        transport: Any = self.transport
        peer = transport.getPeerCertificate()
        self.certificate = None if peer is None else Certificate(peer)
        handle = transport.getHandle()
        self.site.handshake_done(handle)
        _drop_verify_callback(handle)
        self.wire_ready()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        self.transport = None  # the TLS layer names this connection back: no cycle left

    def went_idle(self) -> None:
        if not self._saved:  # the session, once, for the next connection to resume
            self._saved = True
            transport: Any = self.transport
            self.site.keep_session(transport.getHandle())
        super().went_idle()
