"""https through the lean handler, against nginx with TLS on loopback (``benchmarks.synthweb``,
a self-signed certificate made at start).

* the lean handler's responses equal Scrapy's ``HTTP11DownloadHandler``'s on the same server
  (class, URL, status, headers but ``Date``, body, flags, IP, protocol, certificate);
* TLS sessions are resumed on new connections to a site and counted, as nginx logs them;
* Scrapy's TLS settings mean what they mean in Scrapy (method, ciphers, verbose logging,
  ``DOWNLOAD_VERIFY_CERTIFICATES``), and a certificate that fails verification is counted
  under its reason, ``larbin/dropped/tls_certificate``;
* a crawl of the web over https goes through the lean handler only, at most
  ``CONCURRENT_REQUESTS_PER_DOMAIN`` connections per host, resuming sessions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Request
from scrapy.core.downloader.contextfactory import _ScrapyClientContextFactory
from scrapy.exceptions import DownloadFailedError, ScrapyDeprecationWarning
from twisted.internet.ssl import Certificate, PrivateCertificate

from larbinscrapy.lean import http1tls
from larbinscrapy.politeness import failures
from tests.support.http1 import make_handler, plain_reactor, run
from tests.support.synthweb import crawl_synthweb
from testweb.synthweb import LogEntry, SynthWeb, self_signed_certificate

pytestmark = pytest.mark.crawl  # nginx and crawls: not in make test-fast

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

NET = "127.0.45"  # this module's loopback addresses (nginx binds a free port on each)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SynthWeb]:
    with (
        plain_reactor(),
        SynthWeb(
            hosts=2,
            pages_per_host=20,
            dead=0,
            tls=True,
            net=NET,
            workdir=str(tmp_path_factory.mktemp("web")),
        ) as served,
    ):
        yield served


def _logged(web: SynthWeb, start: int, count: int) -> list[LogEntry]:
    """The access log's entries from ``start`` once it has ``count`` of them (nginx writes a
    line after the answer's last byte: the client may have it first)."""
    deadline = time.monotonic() + 10
    while len(entries := web.access_log_entries(start)) < count and time.monotonic() < deadline:
        run(asyncio.sleep(0.02))
    return entries


def _summary(response: Any) -> tuple[Any, ...]:
    headers = [(k, v) for k, v in response.headers.items() if k != b"Date"]
    cert = response.certificate
    return (
        type(response).__name__,
        response.url,
        response.status,
        headers,
        response.body,
        response.flags,
        str(response.ip_address),
        response.protocol,
        cert and cert.digest(),
    )


async def _fetch(handler: Any, requests: list[Request], at_once: int = 8) -> list[Any]:
    sem = asyncio.Semaphore(at_once)

    async def one(request: Request) -> Any:
        async with sem:
            return await handler.download_request(request)

    return list(await asyncio.gather(*(one(r) for r in requests)))


def test_same_answers_as_scrapy(web: SynthWeb) -> None:
    urls = sorted(web.pages)
    extra = [web.seeds[0] + "robots.txt", web.seeds[0] + "missing.html"]

    def requests() -> list[Request]:
        return [Request(u) for u in urls + extra] + [
            Request(urls[3], method="HEAD"),
            Request(urls[4], headers={"Accept-Encoding": "gzip"}),
        ]

    got = {}
    for name in ("scrapy", "lean"):
        handler, crawler = make_handler(name)
        got[name] = [_summary(r) for r in run(_fetch(handler, requests()), timeout=60)]
        run(handler.close())
        if name == "lean":
            stats = crawler.stats.get_stats()
            assert "larbin/http1/delegated" not in stats
            assert stats["larbin/tls/handshakes"] == stats["larbin/http1/connections"]
    assert got["lean"] == got["scrapy"]
    served = Certificate.loadPEM((web.dir / "cert.pem").read_bytes()).digest()
    assert all(s[8] == served for s in got["lean"])
    statuses = [s[2] for s in got["lean"]]
    assert statuses.count(200) == len(urls) + 3 and 404 in statuses


def test_sessions_resumed_and_counted(web: SynthWeb) -> None:
    handler, crawler = make_handler("lean")
    urls = sorted(u for u in web.pages if u.startswith(web.seeds[1]))
    start = web.log_offset()

    async def go() -> None:
        for url in urls[:3]:  # one connection each: the pool's idle ones closed in between
            await handler.download_request(Request(url))
            handler._pool.close()
        await _fetch(handler, [Request(u) for u in urls[3:9]], at_once=6)

    run(go(), timeout=60)
    run(handler.close())
    stats = crawler.stats.get_stats()
    entries = _logged(web, start, 9)
    reused = {e.connection for e in entries if e.reused}
    connections = {e.connection for e in entries}
    assert stats["larbin/tls/handshakes"] == len(connections) == stats["larbin/http1/connections"]
    # the first connection has no session to offer; every later one offers the site's
    assert stats["larbin/tls/resumed"] == len(reused) == len(connections) - 1


@pytest.mark.filterwarnings("ignore:Passing method:DeprecationWarning")  # Scrapy passes it
def test_tls_method_and_ciphers_as_in_scrapy(web: SynthWeb) -> None:
    cipher = "ECDHE-ECDSA-AES128-GCM-SHA256"
    handler, _ = make_handler(
        "lean", DOWNLOADER_CLIENT_TLS_METHOD="TLSv1.2", DOWNLOADER_CLIENT_TLS_CIPHERS=cipher
    )
    with pytest.warns(ScrapyDeprecationWarning, match="DOWNLOADER_CLIENT_TLS_METHOD"):
        response = run(handler.download_request(Request(web.seeds[0])))
    assert response.status == 200
    (conn,) = [c for conns in handler._pool.idle.values() for c in conns]
    tls = conn.transport.getHandle()
    assert (tls.get_protocol_version_name(), tls.get_cipher_name()) == ("TLSv1.2", cipher)
    run(handler.close())


def test_verbose_logging_as_in_scrapy(web: SynthWeb, caplog: pytest.LogCaptureFixture) -> None:
    handler, _ = make_handler("lean", DOWNLOADER_CLIENT_TLS_VERBOSE_LOGGING=True)
    with caplog.at_level(logging.DEBUG, logger="scrapy.utils.ssl"):
        run(handler.download_request(Request(web.seeds[0])))
    run(handler.close())
    assert any(
        f"SSL connection to {NET}.1 using protocol TLSv1.3" in r.getMessage()
        for r in caplog.records
    ), [r.getMessage() for r in caplog.records]


def test_verification_fails_on_self_signed_and_passes_when_trusted(
    web: SynthWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    handler, _ = make_handler("lean", DOWNLOAD_VERIFY_CERTIFICATES=True)
    with pytest.raises(DownloadFailedError) as info:
        run(handler.download_request(Request(web.seeds[0])))
    assert failures.classify(info.value) == failures.TLS_CERTIFICATE
    run(handler.close())
    # the same certificate, trusted (OpenSSL's default verify paths read SSL_CERT_FILE)
    monkeypatch.setenv("SSL_CERT_FILE", str(web.dir / "cert.pem"))
    handler, _ = make_handler("lean", DOWNLOAD_VERIFY_CERTIFICATES=True)
    response = run(handler.download_request(Request(web.seeds[0])))
    assert response.status == 200 and response.certificate is not None
    run(handler.close())


def test_https_crawl_through_the_lean_handler(web: SynthWeb, tmp_path: Path) -> None:
    start = web.log_offset()
    stats = crawl_synthweb(web, tmp_path / "out", {"CONCURRENT_REQUESTS_PER_DOMAIN": 2})
    entries = web.access_log_entries(start)
    fetched = {web.entry_url(e) for e in entries if e.status == 200}
    assert fetched >= web.pages
    assert "larbin/http1/delegated" not in stats
    per_host: dict[str, set[int]] = defaultdict(set)
    for e in entries:
        per_host[e.host].add(e.connection)
    assert all(len(conns) <= 2 for conns in per_host.values()), per_host
    assert stats["larbin/tls/handshakes"] == sum(len(c) for c in per_host.values())
    assert stats.get("larbin/tls/resumed", 0) == len({e.connection for e in entries if e.reused})


def test_certificate_failures_counted_under_their_reason(web: SynthWeb, tmp_path: Path) -> None:
    start = web.log_offset()
    # robots.txt and sitemaps off: only the seeds are asked for, each fails its handshake
    stats = crawl_synthweb(
        web,
        tmp_path / "out",
        {"DOWNLOAD_VERIFY_CERTIFICATES": True, "ROBOTSTXT_OBEY": False, "LARBIN_SITEMAPS": False},
    )
    assert web.access_log_entries(start) == []  # no request got past the handshake
    assert stats.get("larbin/dropped/tls_certificate") == len(web.seeds), stats


def test_tls_state_kept_for_the_most_recent_sites(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1tls, "MAX_SITES", 2)
    _, crawler = make_handler("lean")
    sites = http1tls.TLSSites(crawler)
    a, b = sites.site("a.test", 443), sites.site("b.test", 443)
    assert sites.site("a.test", 443) is a  # one creator per site, reused
    assert a.creator is not b.creator
    sites.site("c.test", 443)  # b was the least recently used: forgotten
    assert sites.site("a.test", 443) is a
    assert sites.site("b.test", 443) is not b


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the server side (Twisted, pyOpenSSL)
def test_a_host_name_with_sni_like_scrapy_mock_server(web: SynthWeb, tmp_path: Path) -> None:
    # Scrapy's own handler tests serve https://localhost from a twisted.web site with a
    # self-signed certificate: the same here, the server noting the SNI name it was sent
    from twisted.internet import reactor
    from twisted.web.server import Site
    from twisted.web.static import Data

    cert, key = self_signed_certificate(tmp_path, ["localhost"])
    options = PrivateCertificate.loadPEM(cert.read_bytes() + key.read_bytes()).options()
    names: list[bytes | None] = []
    options.getContext().set_tlsext_servername_callback(
        lambda conn: names.append(conn.get_servername())
    )
    page = Data(b"<html>hello</html>", "text/html")
    page.isLeaf = True
    port = reactor.listenSSL(0, Site(page), options, interface="127.0.0.1")  # type: ignore[attr-defined]
    try:
        url = f"https://localhost:{port.getHost().port}/"
        got = {}
        for name in ("scrapy", "lean"):
            handler, _ = make_handler(name)
            got[name] = _summary(run(handler.download_request(Request(url))))
            run(handler.close())
    finally:
        run(port.stopListening())
    headers = {k for k, _ in got["lean"][3]}
    assert [s[:3] for s in got.values()] == [(got["lean"][0], url, 200)] * 2
    assert got["lean"][4:] == got["scrapy"][4:]  # body, flags, IP, protocol, certificate
    assert headers == {k for k, _ in got["scrapy"][3]}
    assert names == [b"localhost", b"localhost"]  # SNI from both handlers


def test_benchmark_peers_accept_the_self_signed_certificate(web: SynthWeb, tmp_path: Path) -> None:
    from benchmarks import peers
    from benchmarks.run import analyze_fetches

    def cmd(crawler: str) -> list[str]:
        return peers.command(
            crawler,
            web=web,
            work=tmp_path,
            items=tmp_path / "i.jsonl",
            delay=0,
            per_domain=8,
            concurrent=100,
        )[0]

    assert "--no-check-certificate" in cmd("wget")
    assert "--insecure" in cmd("crawlee")
    start = web.log_offset()
    handler, _ = make_handler("lean")
    urls = sorted(web.pages)[:6]
    run(handler.download_request(Request(urls[0])))
    handler._pool.close()  # the next two connections offer the first one's session
    run(_fetch(handler, [Request(u) for u in urls[1:]], at_once=2))
    run(handler.close())
    counted = analyze_fetches(web, _logged(web, start, len(urls)))
    assert counted["pages_fetched"] == len(urls)
    assert (counted["connections"], counted["tls_resumed"]) == (3, 2)


class CountingContextFactory(_ScrapyClientContextFactory):
    """Scrapy's context factory, counting the creators it is asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.asked: list[tuple[bytes, int]] = []

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        self.asked.append((hostname, port))
        return super().creatorForNetloc(hostname, port)


def test_one_creator_per_site_from_the_configured_factory(web: SynthWeb) -> None:
    handler, _ = make_handler(
        "lean", DOWNLOADER_CLIENTCONTEXTFACTORY="tests.test_https.CountingContextFactory"
    )

    async def go() -> None:
        for _ in range(2):  # new connections the second time round, the same creators
            await _fetch(handler, [Request(u) for u in sorted(web.pages)], at_once=4)
            handler._pool.close()

    with pytest.warns(ScrapyDeprecationWarning, match="DOWNLOADER_CLIENTCONTEXTFACTORY"):
        run(go(), timeout=60)
    run(handler.close())
    port = int(web.seeds[0].rsplit(":", 1)[1].strip("/"))
    factory = handler._tls.factory
    assert type(factory).__name__ == "CountingContextFactory"
    assert sorted(factory.asked) == [(ip.encode(), port) for ip in sorted(web.ips.values())]


def test_an_ip_is_paced_from_when_the_request_leaves_after_the_tls_handshake(
    tmp_path: Path,
) -> None:
    """The politeness gate's ``Pacer`` (``meta[PACER]``) is told when the request's bytes go
    out. Over TLS they wait in the TLS layer for the handshake: told at the write, the IP's
    next request was paced from before the handshake, and a server whose handshake took 0.3 s
    got the next request 0.3 s sooner than ``LARBIN_IP_DELAY`` after this one."""
    import socket
    import threading

    from larbinscrapy import meta as M
    from testweb.internet.tls import TestCA

    ca = TestCA(tmp_path / "ca", "pace.test")
    listener = socket.create_server((f"{NET}.9", 0))
    arrived: list[float] = []

    def serve() -> None:
        raw, _ = listener.accept()
        time.sleep(0.3)  # a slow handshake: the server takes its time to answer the hello
        with ca.default.wrap_socket(raw, server_side=True) as conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            arrived.append(time.monotonic())
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    told: list[float] = []
    try:
        with plain_reactor():
            handler, _ = make_handler("lean")
            url = f"https://{NET}.9:{listener.getsockname()[1]}/"
            response = run(handler.download_request(Request(url, meta={M.PACER: told.append})))
            run(handler.close())
    finally:
        server.join(5)
        listener.close()
    assert response.body == b"ok"
    assert len(told) == 1 and len(arrived) == 1
    assert told[0] >= arrived[0] - 0.05, arrived[0] - told[0]  # not 0.3 s before it arrived
