"""What a correct polite crawler requests from a seeds list on the simulated internet.

A breadth-first walk over ``Internet.route`` and ``Internet.page_links``: a URL is requested
when its name resolves (DNS ``ok``), its address listens, its host answers (not a tarpit) and
its host's robots.txt allows it (RFC 9309: a 4xx is allow-all, a 5xx disallow-all; a robots.txt
redirect leads to the same host's, so every site of a host has the host's rules). Redirect
targets and the links of 200 pages are followed; no depth limit is needed (every page is within
three links of its host's root). The order does not matter: the walk's result is a set.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from protego import Protego

from testweb.internet.model import ROBOTS_STATUS, ROBOTS_TEXT, Host, Internet
from testweb.web import ROBOTS_AGENT

_PARSERS = {name: Protego.parse(text) for name, text in ROBOTS_TEXT.items()}


def allowed(host: Host, path: str) -> bool:
    """Whether the host's robots.txt lets ``path`` be fetched."""
    status = ROBOTS_STATUS[host.robots]
    if status >= 500:
        return False
    if status >= 400:
        return True
    return bool(_PARSERS[host.robots].can_fetch(path, ROBOTS_AGENT))


@dataclass
class Truth:
    """The walk's result: URLs requested, hosts reached, and what was left out and why."""

    requested: set[str] = field(default_factory=set)  # every URL a correct crawl requests
    pages: set[str] = field(default_factory=set)  # those answered 200 with a page
    hosts: set[int] = field(default_factory=set)  # indexes of hosts with a URL requested
    disallowed: set[str] = field(default_factory=set)  # URLs found but robots-disallowed
    dns_failed: set[str] = field(default_factory=set)  # names linked whose lookup fails
    unreachable: set[str] = field(default_factory=set)  # names resolved but dead or silent


def walk(internet: Internet, seeds: list[str]) -> Truth:
    """The breadth-first walk from ``seeds`` (absolute URLs)."""
    truth = Truth()
    seen = set(seeds)
    queue = deque(seeds)
    while queue:
        url = queue.popleft()
        parts = urlsplit(url)
        name, path = parts.hostname or "", parts.path or "/"
        host = internet.host_of(name)
        if host is None or host.dns != "ok":
            truth.dns_failed.add(name)
            continue
        if host.dead or host.tarpit:
            truth.unreachable.add(name)
            continue
        if not allowed(host, path):
            truth.disallowed.add(url)
            continue
        truth.requested.add(url)
        truth.hosts.add(host.index)
        route = internet.route(parts.scheme, name, path)
        found = (
            [route.location]
            if route.location is not None
            else internet.page_links(host, route.page)
            if route.status == 200
            else []
        )
        if route.status == 200:
            truth.pages.add(url)
        for link in found:
            if link not in seen:
                seen.add(link)
                queue.append(link)
    return truth
