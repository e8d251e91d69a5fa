"""Seed lists (larbin's input): a file of URLs or a comma-separated string."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from larbinscrapy.parse.urls import check_url

__all__ = ["Seeds", "SeedsError", "check_url", "parse_lines", "parse_url_list", "read_seeds_file"]


class SeedsError(Exception):
    """The seeds cannot be used at all (missing file, no valid URL)."""


@dataclass
class Seeds:
    """Valid seed URLs in input order (duplicates removed) and one message per bad line."""

    urls: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_lines(lines: list[str], source: str, max_length: int = 0) -> Seeds:
    """Parse seed lines; ``source`` names the input in messages (``seeds.txt:3: ...``)."""
    seeds = Seeds()
    seen: set[str] = set()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip().lstrip("\ufeff").strip()
        if not line or line.startswith("#"):
            continue
        reason = check_url(line, max_length)
        if reason:
            seeds.errors.append(f"{source}:{lineno}: {reason}: {line[:200]!r}")
        elif line not in seen:
            seen.add(line)
            seeds.urls.append(line)
    return seeds


def read_seeds_file(path: str | os.PathLike[str], max_length: int = 0) -> Seeds:
    """Read a seeds file: one URL per line, ``#`` comments, blank lines, BOM and CRLF allowed."""
    try:
        with open(path, encoding="utf-8-sig", errors="replace", newline=None) as f:
            lines = f.read().splitlines()
    except FileNotFoundError as exc:
        raise SeedsError(_missing_file_message(os.fspath(path))) from exc
    except (OSError, UnicodeError) as exc:
        raise SeedsError(f"cannot read seeds file {os.fspath(path)}: {exc}") from exc
    return parse_lines(lines, os.path.basename(os.fspath(path)), max_length)


def _missing_file_message(path: str) -> str:
    # Under scrapyd the spider runs on the server: a path from the client's disk means nothing
    # there, and "file not found" alone sends users looking for a typo.
    return (
        f"seeds file {path!r} does not exist on this host ({socket.gethostname()}). A crawl "
        "run by scrapyd reads files on the scrapyd host, not on the machine it was scheduled "
        "from: pass the seeds in the schedule call (-d urls=URL,URL), or ship the seeds file "
        "inside the deployed package (-d seeds=package:larbinscrapy/seedlists/FILE)"
    )


def parse_url_list(value: str, max_length: int = 0) -> Seeds:
    """Parse ``-a urls=u1,u2``: positions are reported as ``urls:N``."""
    return parse_lines(value.split(","), "urls", max_length)
