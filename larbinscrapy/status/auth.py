"""The status server's token: where it comes from, where it is written, how a request shows it."""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from twisted.web.server import Request

TOKEN_FILE = "http-token"
ADDRESS_FILE = "http-address"


def make_token(configured: str) -> str:
    """The configured token, or a fresh random one (32 URL-safe characters)."""
    return configured or secrets.token_urlsafe(24)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the owner only, replacing it atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # the mode of an existing tmp file is not changed by O_CREAT
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def save_job_files(jobdir: str, token: str, address: str) -> None:
    """``JOBDIR/http-token`` and ``JOBDIR/http-address`` for ``scrapy addurls --jobdir``."""
    write_private(Path(jobdir, TOKEN_FILE), token + "\n")
    write_private(Path(jobdir, ADDRESS_FILE), address + "\n")


def remove_job_files(jobdir: str) -> None:
    """The crawl is over: ``scrapy addurls --jobdir`` must not find a dead address."""
    for name in (ADDRESS_FILE, TOKEN_FILE):
        Path(jobdir, name).unlink(missing_ok=True)


def read_job_files(jobdir: str) -> tuple[str, str]:
    """(token, address) of the crawl running with ``jobdir``; OSError when it has none."""
    token = Path(jobdir, TOKEN_FILE).read_text().strip()
    address = Path(jobdir, ADDRESS_FILE).read_text().strip()
    return token, address


def presented_token(request: Request) -> str | None:
    """The token a request carries: the Bearer header first, then ``?token=``."""
    header = request.getHeader("authorization")
    if header:
        scheme, _, value = header.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else None
    values = request.args.get(b"token") if request.args else None
    return values[0].decode("utf-8", "replace") if values else None


def authorized(request: Request, token: str) -> bool:
    presented = presented_token(request)
    return presented is not None and hmac.compare_digest(presented.encode(), token.encode())


def same_origin(request: Request) -> bool:
    """No ``Origin`` (curl, scrapy addurls) or the server's own; never another site's."""
    origin = request.getHeader("origin")
    if origin is None:
        return True
    host = request.getHeader("host") or ""
    return origin in (f"http://{host}", f"https://{host}")
