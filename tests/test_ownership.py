"""One owner per piece of state (issue #32, point 2), checked on the package's syntax trees.

* An object's private attributes (``obj._name``) are reached only by the object itself
  (``self``/``cls``): at most ``MAX_PRIVATE_REACHES`` exceptions in the whole package outside
  ``lean/`` (the wall where third-party private names live, counted apart). A part of a
  component that needs another's state is handed that state's owner and calls its methods.
* No ``__init__`` sets more than ``MAX_INIT_ATTRIBUTES`` attributes: a class with more is
  several owners in one, to be split into parts it composes.

namedtuple's ``_replace``/``_asdict``/``_fields``/``_make`` are public API despite the
underscore (it only keeps them apart from field names) and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "larbinscrapy"
WALL = "lean"  # larbinscrapy/lean/: third-party private names, behind the wall
MAX_PRIVATE_REACHES = 5
MAX_INIT_ATTRIBUTES = 20
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


def _modules() -> list[tuple[Path, ast.Module]]:
    return [
        (p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in sorted(PACKAGE.rglob("*.py"))
    ]


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__") and name not in NAMEDTUPLE_API


def private_reaches() -> tuple[list[str], list[str]]:
    """``obj._name`` where ``obj`` is not ``self``/``cls``: (outside lean/, inside lean/)."""
    outside: list[str] = []
    wall: list[str] = []
    for path, tree in _modules():
        in_wall = path.relative_to(PACKAGE).parts[0] == WALL
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            (wall if in_wall else outside).append(f"{_where(path, node)} {ast.unparse(node)}")
    return outside, wall


def _init_attributes(init: ast.FunctionDef) -> set[str]:
    """The ``self.<name>`` an ``__init__`` sets (assigned or declared)."""
    names = set()
    for node in ast.walk(init):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            names.add(node.attr)
    return names


def crowded_inits() -> list[str]:
    """Classes whose ``__init__`` sets more than ``MAX_INIT_ATTRIBUTES`` attributes."""
    found = []
    for path, tree in _modules():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for init in cls.body:
                if isinstance(init, ast.FunctionDef) and init.name == "__init__":
                    count = len(_init_attributes(init))
                    if count > MAX_INIT_ATTRIBUTES:
                        found.append(f"{_where(path, cls)} {cls.name}.__init__ sets {count}")
    return found


def test_private_attributes_are_reached_only_by_their_owner() -> None:
    outside, wall = private_reaches()
    assert len(outside) <= MAX_PRIVATE_REACHES, (
        f"{len(outside)} accesses to another object's private attributes outside lean/ "
        f"(at most {MAX_PRIVATE_REACHES}; {len(wall)} inside lean/, not counted):\n"
        + "\n".join(outside)
    )


def test_no_init_sets_more_than_twenty_attributes() -> None:
    crowded = crowded_inits()
    assert not crowded, (
        f"{len(crowded)} __init__ set more than {MAX_INIT_ATTRIBUTES} attributes (split the "
        f"class into the parts that own them):\n" + "\n".join(crowded)
    )


def test_the_scan_sees_what_it_counts(tmp_path: Path) -> None:
    """The rules catch what they name, and leave the owner's own accesses alone."""
    tree = ast.parse(
        "class A:\n"
        "    def __init__(self):\n"
        + "".join(f"        self.a{i} = {i}\n" for i in range(21))
        + "    def f(self, b):\n"
        "        self._mine = b._theirs\n"
        "        return b._replace(x=1)\n"
    )
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert len(_init_attributes(init)) == 21
    reaches = [
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and _is_private(n.attr)
        and not (isinstance(n.value, ast.Name) and n.value.id == "self")
    ]
    assert reaches == ["_theirs"]
