"""larbin.conf, read into our settings (migration): ``-s LARBIN_CONF=larbin.conf``."""

from __future__ import annotations

import contextlib
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from larbinscrapy.parse.urls import check_url

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
    reader = _Reader(tokenize(text), source)
    reader.run()
    return reader.conf


_VALUE_KEYS = ("from", "starturl", "inputport", "waitduration")  # besides _INT_/_TEXT_KEYS


class _Reader:
    """One pass over larbin.conf's tokens: each key and its values become settings or a message."""

    def __init__(self, tokens: list[Token], source: str) -> None:
        self.tokens, self.source = tokens, source
        self.conf = LarbinConf()
        self.start_urls: list[str] = []
        self.i = 0  # the next token

    def warn(self, lineno: int, message: str) -> None:
        self.conf.warnings.append(f"{self.source}:{lineno}: {message}")

    def run(self) -> None:
        while self.i < len(self.tokens):
            lineno, key = self.tokens[self.i]
            self.i += 1
            if not self._key(lineno, key):
                break
        if self.start_urls:
            self.conf.settings["LARBIN_URLS"] = ",".join(self.start_urls)

    def _key(self, lineno: int, key: str) -> bool:
        """Read one key and its values; False when the file ends where its value should be."""
        name = key.lower()
        if name == "noexternallinks":
            self.conf.settings["LARBIN_EXTERNAL"] = False
        elif name in _LIST_KEYS:
            self._list(lineno, key, name)
        elif name == "proxy":
            args, self.i = _take(self.tokens, self.i, 2)
            self.warn(
                lineno,
                "proxy: Scrapy takes its proxy from the environment: run the "
                f"crawl with http_proxy=http://{':'.join(args)} (and https_proxy)",
            )
        elif not (name in _INT_KEYS or name in _TEXT_KEYS or name in _VALUE_KEYS):
            self.warn(lineno, f"unknown key {key!r} ignored")
            while self.i < len(self.tokens) and self.tokens[self.i][0] == lineno:  # its values
                self.i += 1
        elif self.i == len(self.tokens):
            self.warn(lineno, f"{key} has no value")
            return False
        else:
            _, value = self.tokens[self.i]
            self.i += 1
            self._value(lineno, key, name, value)
        return True

    def _list(self, lineno: int, key: str, name: str) -> None:
        items: list[str] = []
        while self.i < len(self.tokens) and self.tokens[self.i][1].lower() != "end":
            items.append(self.tokens[self.i][1])
            self.i += 1
        if self.i == len(self.tokens):
            self.warn(lineno, f"{key} has no closing 'end'; the list runs to the end of the file")
        self.i += 1
        value = ",".join(items) if name == "limittodomain" else " ".join(items)
        self.conf.settings[_LIST_KEYS[name]] = value

    def _value(self, lineno: int, key: str, name: str, value: str) -> None:
        settings = self.conf.settings
        if name in _TEXT_KEYS:
            settings[_TEXT_KEYS[name]] = value
        elif name == "from":
            settings["DEFAULT_REQUEST_HEADERS"] = {"From": value}
        elif name == "starturl":
            reason = check_url(value)
            if reason:
                self.warn(lineno, f"StartUrl {value!r} skipped: {reason}")
            elif value not in self.start_urls:
                self.start_urls.append(value)
        elif name == "waitduration":
            number = _number(value, float)
            if number is None or not 0 <= number < float("inf"):
                self.warn(lineno, f"waitDuration takes seconds, got {value!r}")
            else:
                settings["DOWNLOAD_DELAY"] = number
        else:
            self._integer(lineno, key, name, value)

    def _integer(self, lineno: int, key: str, name: str, value: str) -> None:
        number = _number(value, int)
        if number is None or number < 0:
            self.warn(lineno, f"{key} takes a non-negative integer, got {value!r}")
        elif name == "inputport":
            if number:
                self.conf.notes.append(
                    f"{self.source}:{lineno}: inputPort {number}: URLs are added "
                    "through the status page (POST /api/urls, scrapy addurls)"
                )
        elif name == "httpport":
            self.conf.settings["LARBIN_STATUS_PORT"] = [number, number] if number else 0
        else:
            self.conf.settings[_INT_KEYS[name]] = number


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
