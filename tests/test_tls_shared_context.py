"""Every https site shares one OpenSSL context, each keeps its own name (issue 35, point 6).

With Scrapy's own context factory the lean handler asked for a creator per site, and each
built its own context: with certificates checked that loads the trust store again (~20 ms
with the system's CA bundle, more than a page's CPU). Now the first site's context serves all;
SNI and the certificate's name check stay per site. Handshakes here are in memory (no server).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from OpenSSL import SSL

from larbinscrapy.lean.http1tls import TLSSites
from tests.support.http1 import make_handler
from testweb.synthweb import self_signed_certificate

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


class _Protocol:
    """What a client creator asks of Twisted's TLS protocol: its factory (ALPN: none here) and
    a sink for a verification failure."""

    def __init__(self) -> None:
        self.failed: list[Any] = []
        self.factory = SimpleNamespace(wrappedFactory=object())

    def failVerification(self, reason: Any) -> None:
        self.failed.append(reason)


def _handshake(client: SSL.Connection, server: SSL.Connection) -> bool:
    """Run a handshake over memory; True when both ends completed it."""
    client.set_connect_state()
    server.set_accept_state()
    for _ in range(20):
        for conn, peer in ((client, server), (server, client)):
            try:
                conn.do_handshake()
            except SSL.WantReadError:
                pass
            except SSL.Error:
                return False
            data = conn.bio_read(65536) if conn.pending() >= 0 else b""
            if data:
                peer.bio_write(data)
        try:
            client.do_handshake()
            server.do_handshake()
            return True
        except (SSL.WantReadError, SSL.Error):
            continue
    return False


def _server(cert: Path, key: Path) -> SSL.Connection:
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.use_certificate_file(str(cert))
    ctx.use_privatekey_file(str(key))
    return SSL.Connection(ctx, None)


def test_sites_share_one_context_and_keep_their_own_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed_certificate(tmp_path, ["a.test"])
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted: only the name is checked
    loads = [0]
    real = SSL.Context.set_default_verify_paths

    def counting(self: SSL.Context) -> None:
        loads[0] += 1
        real(self)

    monkeypatch.setattr(SSL.Context, "set_default_verify_paths", counting)
    _, crawler = make_handler("lean", DOWNLOAD_VERIFY_CERTIFICATES=True)
    sites = TLSSites(crawler)
    conns = {}
    for name in ("a.test", "b.test", "c.test"):
        proto = _Protocol()
        conns[name] = (sites.site(name, 443).creator.clientConnectionForTLS(proto), proto)
    contexts = {id(conn.get_context()) for conn, _ in conns.values()}
    assert len(contexts) == 1 and loads[0] == 1  # before: 3 contexts, the trust store 3 times
    assert {n: c.get_servername() for n, (c, _) in conns.items()} == {
        n: n.encode() for n in conns
    }  # SNI per site
    # the certificate is for a.test: a.test's handshake passes, b.test's fails on the name
    a, a_proto = conns["a.test"]
    assert _handshake(a, _server(cert, key)) and not a_proto.failed
    b, b_proto = conns["b.test"]
    _handshake(b, _server(cert, key))
    assert b_proto.failed, "b.test accepted a certificate for a.test"
