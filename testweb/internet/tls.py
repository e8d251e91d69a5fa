"""The simulated internet's test CA: made at start, a crawl is told to trust ``ca.pem``.

One EC key serves every leaf certificate. ``*.{domain}`` covers every bare host name; a
``www.`` name (one label deeper, which a wildcard cannot cover) gets its own certificate, made
the first time a client names it in SNI and kept in a bounded cache. A crawl trusts the CA with
``SSL_CERT_FILE=ca.pem`` and ``DOWNLOAD_VERIFY_CERTIFICATES=True`` (docs/https.md).
"""

from __future__ import annotations

import datetime as dt
import ssl
from collections import OrderedDict
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

if TYPE_CHECKING:
    from pathlib import Path

CONTEXTS_MAX = 2048


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class TestCA:
    """A CA and the server-side TLS contexts it signs, one per SNI name that needs its own."""

    def __init__(self, directory: Path, domain: str) -> None:
        self.dir = directory
        self.domain = domain
        self.dir.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        self._name = name = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, f"simulated internet CA {domain}")]
        )
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca_path = self.dir / "ca.pem"
        self.ca_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        self._key_path = self.dir / "leaf-key.pem"
        self._key_path.write_bytes(_pem_key(self._leaf_key))
        self._contexts: OrderedDict[str, ssl.SSLContext] = OrderedDict()
        self.default = self._context(f"*.{domain}", [f"*.{domain}", domain])
        self.default.sni_callback = self._sni

    def _leaf(self, names: list[str]) -> bytes:
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self._name)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        return cert.public_bytes(serialization.Encoding.PEM)

    def _context(self, label: str, names: list[str]) -> ssl.SSLContext:
        path = self.dir / f"leaf-{label.replace('*', '_')}.pem"
        if not path.exists():
            path.write_bytes(self._leaf(names))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(path, self._key_path)
        return ctx

    def _sni(self, sslobj: ssl.SSLObject, name: str | None, _ctx: ssl.SSLContext) -> None:
        """Choose the certificate for the SNI name: the wildcard, or the name's own."""
        if not name or name.count(".") <= self.domain.count(".") + 1:
            return
        ctx = self._contexts.get(name)
        if ctx is None:
            ctx = self._contexts[name] = self._context(name, [name])
            if len(self._contexts) > CONTEXTS_MAX:
                self._contexts.popitem(last=False)
        else:
            self._contexts.move_to_end(name)
        sslobj.context = ctx
