"""CPU of a new https site's first TLS connection object in the lean handler (no network).

``python -m benchmarks.bench_tls_sites [--sites 200] [--verify]``: asks ``TLSSites`` for N sites
and makes each one's first ``SSL.Connection`` (what a handshake starts from), with the trust
store OpenSSL's default paths give (the system's CA bundle unless ``SSL_CERT_FILE`` names
another). Prints one JSON line: ms a site, OpenSSL contexts made. Figures go to
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from types import SimpleNamespace
from typing import Any

from OpenSSL import SSL
from scrapy.utils.test import get_crawler

from larbinscrapy.lean.http1tls import TLSSites


class _Protocol:
    """What a client creator asks of Twisted's TLS protocol (ALPN: none)."""

    factory = SimpleNamespace(wrappedFactory=object())

    def failVerification(self, reason: Any) -> None:
        pass


def bench(sites: int, verify: bool) -> dict[str, Any]:
    crawler = get_crawler(settings_dict={"DOWNLOAD_VERIFY_CERTIFICATES": verify})
    tls = TLSSites(crawler)
    proto = _Protocol()
    start = time.process_time()
    contexts = {
        id(tls.site(f"h{i}.example.test", 443).creator.clientConnectionForTLS(proto).get_context())
        for i in range(sites)
    }
    cpu = time.process_time() - start
    return {
        "sites": sites,
        "verify": verify,
        "cpu_ms_per_site": round(cpu * 1000 / sites, 3),
        "contexts": len(contexts),
        "openssl": SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_tls_sites", description=__doc__)
    p.add_argument("--sites", type=int, default=200)
    p.add_argument("--verify", action="store_true", help="DOWNLOAD_VERIFY_CERTIFICATES=True")
    args = p.parse_args(argv)
    from scrapy.utils.reactor import install_reactor

    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    print(json.dumps(bench(args.sites, args.verify)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
