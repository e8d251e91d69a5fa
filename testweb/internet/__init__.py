"""A simulated internet on loopback: DNS, HTTP and HTTPS for 10^3-10^6 generated hosts.

``model.py`` (the generator, pure), ``dns.py`` (the authoritative DNS server), ``web.py`` (the
HTTP/HTTPS server), ``tls.py`` (the test CA), ``netns.py`` (a network namespace whose
resolv.conf points at the DNS server), ``truth.py`` and ``analyze.py`` (what a correct crawl
fetches, and how a crawl did against it). ``python -m testweb.internet --help`` serves it.
"""
