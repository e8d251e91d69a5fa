"""A simulated internet on loopback: DNS, HTTP and HTTPS for 10^3-10^6 generated hosts.

- ``model.py``: the generator, pure: ``Internet(hosts, seed, mix=Mix(...),
  latency=Latency(...), base="127.100.0.0")``; a host is a function of (seed, index).
- ``dns.py``: the authoritative DNS server: ``DnsServer(internet, address, port, log=...)``
  (``await start()``, ``close()``) or, in a test, ``with DnsThread(internet, address, 0) as d``.
- ``web.py`` and ``tls.py``: the HTTP/HTTPS server and its test CA.
- ``netns.py``: a network namespace whose resolv.conf names the DNS server.
- ``harness.py``: the server in a subprocess (``InternetProcess``) or a thread
  (``InternetThread``), and a watched ``scrapy crawl larbin`` of it.
- ``truth.py`` and ``analyze.py``: what a correct crawl requests, and how a crawl did.

``python -m testweb.internet --help`` serves it; ``python -m testweb.internet.analyze LOGDIR``
reports on a run.
"""
