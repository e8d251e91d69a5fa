"""Which failure is whose: the host's (it is gone) or one URL's (it is hostile or broken)."""

from __future__ import annotations

from OpenSSL import SSL
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from service_identity import CertificateError, VerificationError
from twisted.internet import defer
from twisted.internet import error as tx

from larbinscrapy.lean.private import DATA_LOSS, RESPONSE_FAILED

REFUSED = "refused"  # nothing listens: the connection was refused
UNREACHABLE = "unreachable"  # no route, connect timed out, or another connect error
DNS = "dns"  # the name did not resolve at connect time
TIMEOUT = "timeout"  # larbin's page timeout: connected (maybe), no complete answer in time
RESET = "reset"  # the connection broke in the middle of an answer
MALFORMED = "malformed"  # bytes that are not a valid HTTP answer, or a close instead of one
TLS_CERTIFICATE = "tls_certificate"  # the server's certificate failed verification
TLS_HANDSHAKE = "tls_handshake"  # TLS could not be agreed on (protocol, ciphers, a bad answer)

GONE = frozenset({REFUSED, UNREACHABLE, DNS})
URL = frozenset({TIMEOUT, RESET, MALFORMED, TLS_CERTIFICATE, TLS_HANDSHAKE})
ALIVE = frozenset({RESET, MALFORMED, TLS_CERTIFICATE, TLS_HANDSHAKE})  # a server is there

_TIMEOUTS = (DownloadTimeoutError, tx.TimeoutError, defer.TimeoutError)
_RESETS = (ResponseDataLossError, tx.ConnectionLost, DATA_LOSS)
_CERTIFICATE = (VerificationError, CertificateError)  # the certificate names another host


def classify(exc: BaseException | None) -> str | None:
    """The failure kind of a download exception, or None when it is no one's (a bug, a drop)."""
    if isinstance(exc, (DownloadConnectionRefusedError, tx.ConnectionRefusedError)):
        return REFUSED
    if isinstance(exc, (CannotResolveHostError, tx.DNSLookupError)):
        return DNS
    if isinstance(exc, tx.TCPTimedOutError):  # the SYN was never answered
        return UNREACHABLE
    if type(exc) is tx.UserError:  # a dial we stopped (its subclass TimeoutError is a timeout)
        return None
    if isinstance(exc, _TIMEOUTS):
        return TIMEOUT
    if isinstance(exc, _RESETS):
        return RESET
    if isinstance(exc, DownloadFailedError):
        cause = exc.__cause__
        return _response_failed(cause) if cause is not None else MALFORMED
    if isinstance(exc, RESPONSE_FAILED):
        return _response_failed(exc)
    if isinstance(exc, tx.ConnectionDone):
        return MALFORMED
    if isinstance(exc, tx.ConnectError):
        return UNREACHABLE
    return None


def _response_failed(exc: BaseException) -> str:
    """``ResponseFailed`` lists why: a reset if the connection broke, TLS if its handshake
    failed, else malformed."""
    reasons = getattr(exc, "reasons", None) or []
    values = [getattr(r, "value", r) for r in reasons]
    if any(isinstance(v, _RESETS) for v in values):
        return RESET
    for value in values:
        if isinstance(value, _CERTIFICATE) or (
            isinstance(value, SSL.Error) and "certificate" in str(value)
        ):
            return TLS_CERTIFICATE
        if isinstance(value, SSL.Error):
            return TLS_HANDSHAKE
    return MALFORMED
