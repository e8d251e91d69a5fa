"""Settings declared once, beside their default, and checked once at start.

``larbinscrapy/conf/defaults.py`` declares each setting as ``NAME = Setting(default, kind, ...,
doc="...")`` and ends with ``SETTINGS = publish(globals())``, which leaves the plain default
under each name (what Scrapy and ``from larbinscrapy.conf.defaults import *`` see) and keeps the
declarations in ``SETTINGS``. ``check(settings)`` reads every ``LARBIN_*`` setting the way its
component does (``getint``, ``getfloat``, the component's own parser) and compares it with its
range: a wrong value is one line that names the setting, the value and what it takes.
A renamed setting declares its old name (``old="LARBIN_..."``): a value set under the old name
still works, copied to the new one, with one warning per old name (``renames``).
``docs/settings_table.py`` writes ``docs/settings.md`` from the same declarations.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scrapy.utils.misc import load_object

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, MutableMapping

    from scrapy.settings import BaseSettings

T = TypeVar("T")

# What a value that is read as this kind takes, in words (the start of the message).
_KIND_WORDS: dict[type, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "text",
}
_GETTERS = {bool: "getbool", int: "getint", float: "getfloat"}
_PARSE_ERRORS = (
    TypeError,
    ValueError,
    AttributeError,
    KeyError,
    ImportError,
    NameError,
    OverflowError,
)


class SettingsError(ValueError):
    """One or more settings hold a value their component cannot use (the message says which)."""


class Setting(Generic[T]):
    """One setting: its default, what it takes and what it means (``docs/settings.md``).

    ``kind`` is how components read it (``bool``, ``int``, ``float``, ``str``); ``None`` with
    ``parse`` (``"module.function"``, the component's own parser, which raises on a bad value)
    for the settings that take a structure; ``None`` alone for Scrapy's settings, which Scrapy
    checks itself. ``min``/``max`` are inclusive bounds, ``above``/``below`` exclusive ones.
    ``old`` is the name it had before a rename, kept as a deprecated alias.
    """

    def __init__(
        self,
        default: T,
        kind: type | None = None,
        *,
        min: float | None = None,
        max: float | None = None,
        above: float | None = None,
        below: float | None = None,
        choices: tuple[str, ...] = (),
        parse: str = "",
        takes: str = "",
        old: str = "",
        doc: str = "",
    ) -> None:
        self.default, self.kind, self.choices = default, kind, choices
        self.old = old  # the deprecated name it had before, still read (``renames``)
        self.min, self.max, self.above, self.below = min, max, above, below
        self.parse = parse
        self.takes = takes  # what ``parse`` accepts, in words
        self.doc = doc
        self.name = ""  # filled by ``publish``

    def __repr__(self) -> str:
        return f"<Setting {self.name or '?'}={self.default!r}>"

    def describe(self) -> str:
        """What the setting takes, in words: ``an integer >= 1``, ``one of 'a', 'b'``."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        words = self.takes or (_KIND_WORDS.get(self.kind, "") if self.kind else "")
        if self.min is not None and self.max is not None:
            return f"{words} from {_number(self.min)} to {_number(self.max)}"
        bounds = [
            f"{op} {_number(bound)}"
            for op, bound in (
                (">", self.above),
                (">=", self.min),
                ("<", self.below),
                ("<=", self.max),
            )
            if bound is not None
        ]
        return " ".join([words, " and ".join(bounds)]).strip()

    def in_range(self, value: float) -> bool:
        return (
            (self.min is None or value >= self.min)
            and (self.max is None or value <= self.max)
            and (self.above is None or value > self.above)
            and (self.below is None or value < self.below)
        )

    def problem(self, settings: BaseSettings) -> str | None:
        """Why the value in ``settings`` cannot be used, or ``None`` when it can."""
        raw = settings.get(self.name)
        try:
            value = self._read(settings, raw)
        except _PARSE_ERRORS:
            return self._message(raw)
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and not math.isfinite(value):  # inf or nan: no setting means "for ever"
            return self._message(raw) + " (a finite one)"
        if (number and not self.in_range(value)) or (self.choices and value not in self.choices):
            return self._message(raw)
        return None

    def _read(self, settings: BaseSettings, raw: Any) -> Any:
        if self.parse:
            parser: Callable[[Any], Any] = load_object(self.parse)
            return parser(raw)
        if self.kind in _GETTERS:
            return getattr(settings, _GETTERS[self.kind])(self.name)
        if self.kind is str and raw is not None and not isinstance(raw, str):
            raise TypeError(self.name)
        return raw

    def _message(self, raw: Any) -> str:
        return f"setting {self.name}={raw!r} is not valid: it takes {self.describe()}"


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def publish(namespace: MutableMapping[str, Any]) -> dict[str, Setting[Any]]:
    """Replace each ``Setting`` in ``namespace`` by its default; return them by name."""
    table: dict[str, Setting[Any]] = {}
    for name, value in list(namespace.items()):
        if isinstance(value, Setting):
            value.name = name
            table[name] = value
            namespace[name] = value.default
    return table


def key_template(value: Any) -> str:
    """A Redis key template such as ``"%(spider)s:frontier"`` (raises when it cannot expand)."""
    return str(value % {"spider": "larbin", "name": "larbin"})


def import_path(value: Any) -> str:
    """``"package.module.Name"`` whose module exists (found without running it), or empty.

    The check runs before Scrapy installs its reactor: importing a download handler's module
    then could install another one.
    """
    if value == "":  # empty: the component chooses (the lean engine's switch)
        return ""
    module, _, name = str(value).rpartition(".")
    if not (module and name.isidentifier() and importlib.util.find_spec(module)):
        raise ValueError(value)
    return str(value)


def check(settings: BaseSettings) -> list[str]:
    """Raise ``SettingsError`` naming every bad value; return warnings.

    Every declared setting with a kind is checked, Scrapy's own too (``DOWNLOAD_DELAY=inf``
    would hang the crawl): numbers must be finite and in range.

    Values set under an old name are first moved to the new one (``renames``). The warnings are
    one per old name in use and one per unknown ``LARBIN_*`` name (a typo is otherwise silently
    ignored), naming the closest known one. The caller that logs them (``LarbinAddon``) runs
    once per crawler: each old name is warned about once.
    """
    from larbinscrapy.conf.defaults import SETTINGS as table  # it imports this module

    if not any(name in settings for name in table if name.startswith("LARBIN_")):
        raise SettingsError(
            "larbinscrapy's settings are not installed: add ADDONS = "
            '{"larbinscrapy.addon.LarbinAddon": 0} to the settings'
        )
    warnings = renames(settings, table)
    errors = [p for spec in table.values() if (p := spec.problem(settings))]
    if errors:
        raise SettingsError("; ".join(errors))
    old = {spec.old for spec in table.values()}
    return warnings + [
        _unknown(name, table)
        for name in settings
        if name.startswith("LARBIN_") and name not in table and name not in old
    ]


def renames(settings: BaseSettings, table: dict[str, Setting[Any]]) -> list[str]:
    """Copy each value set under an old name to its new name; one warning per old name used.

    The old name's value wins over the new name's only when it was set with a higher priority
    (``-s OLD=1`` over the add-on's default of NEW; NEW in the same ``settings.py`` wins).
    Frozen settings (already renamed by the add-on) are only warned about.
    """
    warnings = []
    for spec in table.values():
        if not spec.old or spec.old not in settings:
            continue
        priority = settings.getpriority(spec.old) or 0
        if not settings.frozen and priority > (settings.getpriority(spec.name) or 0):
            settings.set(spec.name, settings[spec.old], priority=priority)
        warnings.append(
            f"setting {spec.old} is deprecated: it is now {spec.name} "
            "(the old name still works, for now)"
        )
    return warnings


def _unknown(name: str, known: Iterable[str]) -> str:
    """``unknown setting X (did you mean Y?)``, the closest known name when one is close: a
    Scrapy setting with a ``LARBIN_`` prefix (``LARBIN_REDIS_URL``) is the Scrapy one."""
    from scrapy.settings import default_settings

    bare = name.removeprefix("LARBIN_")
    if bare.isupper() and (hasattr(default_settings, bare) or bare in known):
        close = [bare]
    else:
        close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    hint = f"did you mean {close[0]}?" if close else "docs/settings.md lists the known ones"
    return f"unknown setting {name} ignored ({hint})"
