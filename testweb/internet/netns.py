"""A network namespace whose resolv.conf points at the simulated internet's DNS server.

``ip netns add NAME`` makes a namespace with its own loopback (brought up here); a file at
``/etc/netns/NAME/resolv.conf`` is bind-mounted over ``/etc/resolv.conf`` for every process run
with ``ip netns exec NAME``, so a crawl inside it uses the ordinary system resolver, pointed at
our DNS server. resolv.conf cannot carry a port: the DNS server listens on port 53 of a loopback
address inside the same namespace, with the web servers and the crawl (each namespace has its
own loopback, so nothing there is seen from outside). Needs root. The name is
``internet-<pid>[-<n>]``; ``delete()`` (or leaving the ``with``) removes the namespace and its
``/etc/netns`` directory.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

PREFIX = "internet-"
ETC_NETNS = Path("/etc/netns")
_serial = itertools.count()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Namespace:
    """A uniquely named namespace; ``command(argv)`` runs ``argv`` inside it."""

    def __init__(
        self, nameserver: str, *, options: str = "timeout:1 attempts:2", name: str | None = None
    ) -> None:
        n = next(_serial)
        self.name = name or f"{PREFIX}{os.getpid()}" + (f"-{n}" if n else "")
        self.nameserver = nameserver
        self.options = options
        self.created = False

    @property
    def etc(self) -> Path:
        return ETC_NETNS / self.name

    def create(self) -> Namespace:
        _ip("netns", "add", self.name)
        self.created = True
        try:
            _ip("netns", "exec", self.name, "ip", "link", "set", "lo", "up")
            self.etc.mkdir(parents=True, exist_ok=True)
            text = f"nameserver {self.nameserver}\n"
            if self.options:
                text += f"options {self.options}\n"
            (self.etc / "resolv.conf").write_text(text)
            (self.etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
        except BaseException:
            self.delete()
            raise
        return self

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(argv), check=False, **kwargs)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.command(argv), **kwargs)

    def delete(self) -> None:
        if self.created:
            subprocess.run(
                ["ip", "netns", "delete", self.name], check=False, capture_output=True, timeout=30
            )
            self.created = False
        shutil.rmtree(self.etc, ignore_errors=True)

    def __enter__(self) -> Namespace:
        return self.create()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.delete()


def leftovers() -> list[str]:
    """Namespaces named by this module that still exist (a test checks none is left)."""
    out = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=False
    ).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(PREFIX)]
