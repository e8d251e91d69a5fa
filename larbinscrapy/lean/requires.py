"""The start-up check of the engine replacements: are the private names each relies on still there?

Each module of ``larbinscrapy/lean/`` declares ``REQUIRES``: the Scrapy and Twisted names it
imports, overrides or copies, as ``(module, dotted name)`` or ``(module, dotted name, digest)``.
The digest is a short hash of the name's source (a class: of its methods'; the name ``*``: of the
whole module file, read without importing it): a function whose behaviour a replacement mirrors
(a step added to Scrapy's middleware chain, a new stat) changes its digest, and the replacement
is then left out (Scrapy's own component runs) until someone re-reads the upstream change, runs
``make conformance`` and updates the digest. ``python -m larbinscrapy.lean.requires`` prints
what changed against the installed Scrapy and Twisted. The check runs at every start, so it
reads source lines from ``linecache`` instead of ``inspect.getsource`` (which tokenizes).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import linecache
import sys
from types import CodeType
from typing import Any

Private = tuple[str, str] | tuple[str, str, str]
WHOLE_FILE = "*"


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _last_line(code: CodeType) -> int:
    """The last source line of ``code``, nested functions included."""
    lines = [line for *_, line in code.co_lines() if line is not None]
    nested = [_last_line(c) for c in code.co_consts if isinstance(c, CodeType)]
    return max([code.co_firstlineno, *lines, *nested])


def digest(obj: Any) -> str:
    """A short hash of ``obj``'s source: a function, a property's getter, a class's methods."""
    if isinstance(obj, type):
        parts = [
            f"{name}:{digest(member)}"
            for name, member in sorted(vars(obj).items())
            if isinstance(member, property) or hasattr(member, "__code__")
        ]
        return _hash("\n".join(parts))
    if isinstance(obj, property) and obj.fget is not None:
        obj = obj.fget
    code = getattr(inspect.unwrap(obj), "__code__", None)  # a decorated function's own code
    if code is None:
        raise TypeError(f"no source for {obj!r}")
    lines = linecache.getlines(code.co_filename)
    if not lines:
        raise OSError(f"{code.co_filename} cannot be read")
    return _hash("".join(lines[code.co_firstlineno - 1 : _last_line(code)]))


def file_digest(module: str) -> str:
    """A short hash of ``module``'s source file, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError as exc:
        raise LookupError(f"{module} cannot be found ({exc})") from None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise LookupError(f"{module} has no source file")
    with open(spec.origin, encoding="utf-8") as f:
        return _hash(f.read())


def resolve(module: str, name: str) -> Any:
    """``module.name`` (``name`` may be dotted), raising ``LookupError`` when it is not there."""
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as exc:
        raise LookupError(f"{module} cannot be imported ({exc})") from None
    for part in name.split("."):
        if isinstance(obj, type):  # a class attribute as defined: a property, not its value
            found = next((vars(k)[part] for k in obj.__mro__ if part in vars(k)), _MISSING)
        else:
            found = getattr(obj, part, _MISSING)
        if found is _MISSING:
            raise LookupError(f"{module}.{name} is missing")
        obj = found
    return obj


_MISSING = object()


def problem(entry: Private) -> str | None:
    """Why ``entry`` does not hold in the installed Scrapy/Twisted, or None when it does."""
    module, name = entry[0], entry[1]
    try:
        obj = None if name == WHOLE_FILE else resolve(module, name)
        found = file_digest(module) if name == WHOLE_FILE else None
    except (LookupError, OSError) as exc:
        return str(exc)
    if len(entry) == 3:  # noqa: PLR2004  # (module, name, digest)
        try:
            found = found or digest(obj)
        except (OSError, TypeError):
            return f"{module}.{name}: its source cannot be read to compare"
        if found != entry[2]:
            return f"{module}.{name} changed (source {found}, written against {entry[2]})"
    return None


def problems(requires: tuple[Private, ...]) -> list[str]:
    """Every entry of ``requires`` that does not hold, as one phrase each."""
    return [p for p in (problem(entry) for entry in requires) if p is not None]


def main(modules: list[str]) -> int:
    """Print each lean module's problems (for the one who updates a digest after a release)."""
    from larbinscrapy.lean.addon import REPLACEMENTS

    status = 0
    for replacement in REPLACEMENTS:
        if modules and replacement.name not in modules:
            continue
        try:
            requires = importlib.import_module(replacement.module).REQUIRES
        except ImportError as exc:
            print(f"{replacement.name}: {exc}")
            status = 1
            continue
        for entry in requires:
            text = problem(entry)
            if text is not None:
                status = 1
                print(f"{replacement.name}: {text}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
