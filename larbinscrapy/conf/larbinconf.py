"""larbin.conf, read into our settings (migration): ``-s LARBIN_CONF=larbin.conf``."""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from larbinscrapy.seeds.seedlist import check_url

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)


class LarbinConfError(ValueError):
    """The file named by ``LARBIN_CONF`` cannot be read at all."""


@dataclass
class LarbinConf:
    """What a larbin.conf says: settings to apply and one message per problem."""

    settings: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


Token = tuple[int, str]  # (line number, token)

_INT_KEYS = {
    "httpport": "LARBIN_STATUS_PORT",
    "pagesconnexions": "CONCURRENT_REQUESTS",
    "dnsconnexions": "REACTOR_THREADPOOL_MAXSIZE",
    "depthinsite": "LARBIN_DEPTH",
}
_TEXT_KEYS = {"useragent": "USER_AGENT"}
_LIST_KEYS = {
    "limittodomain": "LARBIN_DOMAINS",
    "forbiddenextensions": "LARBIN_GATE_FORBIDDEN_EXTENSIONS",
}


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for tok in re.split(r"\s+", line.split("#", 1)[0].strip()):
            if tok:
                tokens.append((lineno, tok))
    return tokens


def parse(text: str, source: str = "larbin.conf") -> LarbinConf:
    """Parse larbin.conf text; messages are ``source:LINE: ...``."""
    conf = LarbinConf()
    tokens = tokenize(text)
    start_urls: list[str] = []
    i = 0

    def warn(lineno: int, message: str) -> None:
        conf.warnings.append(f"{source}:{lineno}: {message}")

    while i < len(tokens):
        lineno, key = tokens[i]
        name = key.lower()
        i += 1
        if name == "noexternallinks":
            conf.settings["LARBIN_EXTERNAL"] = False
            continue
        if name in _LIST_KEYS:
            items: list[str] = []
            while i < len(tokens) and tokens[i][1].lower() != "end":
                items.append(tokens[i][1])
                i += 1
            if i == len(tokens):
                warn(lineno, f"{key} has no closing 'end'; the list runs to the end of the file")
            i += 1
            value = ",".join(items) if name == "limittodomain" else " ".join(items)
            conf.settings[_LIST_KEYS[name]] = value
            continue
        if name == "proxy":
            args, i = _take(tokens, i, 2)
            warn(lineno, "proxy: Scrapy takes its proxy from the environment: run the crawl "
                 f"with http_proxy=http://{':'.join(args)} (and https_proxy)")
            continue
        known = name in _INT_KEYS or name in _TEXT_KEYS or name in (
            "from", "starturl", "inputport", "waitduration")
        if not known:
            warn(lineno, f"unknown key {key!r} ignored")
            while i < len(tokens) and tokens[i][0] == lineno:  # its values
                i += 1
            continue
        if i == len(tokens):
            warn(lineno, f"{key} has no value")
            break
        _, value = tokens[i]
        i += 1
        if name in _TEXT_KEYS:
            conf.settings[_TEXT_KEYS[name]] = value
        elif name == "from":
            conf.settings["DEFAULT_REQUEST_HEADERS"] = {"From": value}
        elif name == "starturl":
            reason = check_url(value)
            if reason:
                warn(lineno, f"StartUrl {value!r} skipped: {reason}")
            elif value not in start_urls:
                start_urls.append(value)
        elif name == "waitduration":
            number = _number(value, float)
            if number is None or number < 0:
                warn(lineno, f"waitDuration takes seconds, got {value!r}")
            else:
                conf.settings["DOWNLOAD_DELAY"] = number
        else:
            number = _number(value, int)
            if number is None or number < 0:
                warn(lineno, f"{key} takes a non-negative integer, got {value!r}")
            elif name == "inputport":
                if number:
                    conf.notes.append(f"{source}:{lineno}: inputPort {number}: URLs are added "
                                      "through the status page (POST /api/urls, scrapy addurls)")
            elif name == "httpport":
                conf.settings["LARBIN_STATUS_PORT"] = [number, number] if number else 0
            else:
                conf.settings[_INT_KEYS[name]] = number
    if start_urls:
        conf.settings["LARBIN_URLS"] = ",".join(start_urls)
    return conf


def _take(tokens: list[Token], i: int, n: int) -> tuple[list[str], int]:
    """Up to ``n`` value tokens on the key's line."""
    line = tokens[i - 1][0]
    out: list[str] = []
    while i < len(tokens) and len(out) < n and tokens[i][0] == line:
        out.append(tokens[i][1])
        i += 1
    return out, i


def _number(text: str, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text)
    except ValueError:
        return None


def read(path: str) -> LarbinConf:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise LarbinConfError(f"LARBIN_CONF: cannot read {path}: {exc.strerror}") from None
    return parse(text, path)


def apply(conf: LarbinConf, settings: BaseSettings) -> None:
    """Set what ``conf`` says at the ``project`` priority: ``-s`` (cmdline) still wins."""
    for name, given in conf.settings.items():
        value = {**settings.getdict(name), **given} if isinstance(given, dict) else given
        settings.set(name, value, priority="project")


class LarbinConfAddon:
    """Scrapy add-on (``ADDONS``) that reads ``LARBIN_CONF``.

    Applied twice on purpose: ``update_pre_crawler_settings`` runs on the process settings
    before any crawler exists, so the spider, built before a crawler's add-ons run, already sees
    ``StartUrl`` and ``depthInSite``; ``update_settings`` runs once logging is set up and says
    what the file contained (warnings with line numbers), applying the same values again.
    """

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        path = settings.get("LARBIN_CONF")
        if path:  # a file that cannot be read is reported by update_settings, after logging
            with contextlib.suppress(LarbinConfError):
                apply(read(path), settings)

    def update_settings(self, settings: BaseSettings) -> None:
        path = settings.get("LARBIN_CONF")
        if not path:
            return
        try:
            conf = read(path)
        except LarbinConfError as exc:
            # One line and a failed crawl (exit 1), as for a missing seeds file, no traceback.
            from larbinscrapy.fatal import retrieve_task_exception

            logger.error("%s", exc)
            retrieve_task_exception()
            raise
        for message in conf.warnings:
            logger.warning("%s", message)
        for message in conf.notes:
            logger.info("%s", message)
        apply(conf, settings)
        logger.info("Read %s: %s", path, ", ".join(sorted(conf.settings)) or "nothing to apply")
