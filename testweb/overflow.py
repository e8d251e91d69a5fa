"""The "overflow" test web: a dozen sites that each queue more URLs than a site's cap.

Built for the frontier's wait FIFOs (issue #13): every site's home links to all its articles
at once, and a hub page on a 13th IP links to query variants on every site, so each site holds
~100 URLs while ``LARBIN_FRONTIER_URLS_PER_SITE_MAX`` is 40 and most of them wait on disk for a
long time.
Articles also link to a few IP-literal addresses on loopback where nothing listens (refused
connections, as on a real web), which the server never sees: ``DEAD_IPS``.
"""

from __future__ import annotations

from testweb.web import Web, _Builder

OVERFLOW_HOSTS = [f"o{i:02d}.test" for i in range(12)]
HUB_HOST = "hub.test"
DEAD_IPS = ("127.0.4.201", "127.0.4.202", "127.0.4.203")  # nothing listens there
ARTICLES = 40  # /a/N.html per site, all linked from its home
VARIANTS = 30  # /q?id=N per site (from articles) and /q?id=N&ref=hub (from the hub)


def build_overflow(port: int) -> Web:
    """12 sites of ~100 URLs (1 home, 40 articles, 30 + 30 query variants) and a hub."""
    web = Web("overflow", port, {}, {}, {}, [])
    b = _Builder(web, seed=13)
    allow = "User-agent: *\nDisallow:\n"
    for i, host in enumerate(OVERFLOW_HOSTS):
        b.host(host, f"127.0.4.{i + 1}", allow)
        articles = [f"/a/{n}.html" for n in range(ARTICLES)]
        b.html(host, "/", f"{host} home", articles)
        for n, path in enumerate(articles):
            links = ["/", articles[(n + 1) % ARTICLES]]
            if n < VARIANTS:
                links.append(f"/q?id={n}")
            if n % 10 == 0:
                dead = DEAD_IPS[(i + n) % len(DEAD_IPS)]
                links.append(f"http://{dead}:{port}/gone/{host}/{n}")
            b.html(host, path, f"{host} article {n}", links)
        for n in range(VARIANTS):
            b.html(host, f"/q?id={n}", f"{host} variant {n}", ["/"])
            b.html(host, f"/q?id={n}&ref=hub", f"{host} hub variant {n}", ["/"])
    b.host(HUB_HOST, "127.0.4.100", allow)
    hub_links = [
        f"http://{host}:{port}/q?id={n}&ref=hub" for n in range(VARIANTS) for host in OVERFLOW_HOSTS
    ]
    b.html(HUB_HOST, "/", "hub: many links", hub_links)
    web.seeds = [web.url(HUB_HOST), *(web.url(h) for h in OVERFLOW_HOSTS)]
    return web
