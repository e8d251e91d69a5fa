"""``HeldLeases``: the IP leases this worker holds, by IP, for the release of each fetch.

A leased record (a pop, ``Pops``) or a sitemap fetch (``SharedSitemaps``) holds a connection of
its IP in the record's shard; the send-time gate's release of that IP (``Releases``) gives the
oldest one back, in the order they were taken.
"""

from __future__ import annotations


class HeldLeases:
    """ip -> the (shard, record id) of each lease held on it, oldest first."""

    def __init__(self) -> None:
        self.by_ip: dict[str, list[tuple[int, str]]] = {}

    def hold(self, ip: str, shard: int, rid: str) -> None:
        self.by_ip.setdefault(ip, []).append((shard, rid))

    def take(self, ip: str) -> tuple[int, str] | None:
        """The oldest lease held on ``ip``, no longer held; None: none is."""
        held = self.by_ip.get(ip)
        if not held:
            return None
        first = held.pop(0)
        if not held:
            del self.by_ip[ip]
        return first
