"""The tables of docs/DESIGN.md that the code can write: settings, request meta keys, stats keys.

``python docs/design_tables.py`` rewrites each block between ``<!-- table: NAME -->`` and
``<!-- end: NAME -->`` in docs/DESIGN.md; ``tests/test_prose.py`` checks it is up to date.
Settings come from ``larbinscrapy/conf/defaults.py``, meta keys from ``larbinscrapy/meta.py``
(a constant and its comment), stats keys from the package's ``"larbin/..."`` literals and
f-strings (a placeholder shown as ``<name>``).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from larbinscrapy.conf.defaults import SETTINGS  # noqa: E402

DESIGN = ROOT / "docs" / "DESIGN.md"
PACKAGE = ROOT / "larbinscrapy"
BLOCK = re.compile(r"(<!-- table: (\w+) -->\n).*?(<!-- end: \2 -->)", re.S)


def settings_table() -> str:
    """One row per prefix (the component it configures): how many settings, their names."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name in SETTINGS:
        if name.startswith("LARBIN_"):
            groups["LARBIN_" + name.split("_")[1]].append(name)
        else:
            groups["Scrapy's"].append(name)
    rows = ["| prefix | settings |", "|---|---|"]
    for prefix in sorted(groups, key=lambda p: (p == "Scrapy's", p)):
        names = ", ".join(f"`{n}`" for n in groups[prefix])
        rows.append(
            f"| `{prefix}_*` | {names} |" if prefix != "Scrapy's" else f"| Scrapy's own | {names} |"
        )
    return "\n".join(rows)


def meta_table() -> str:
    """Every key of ``meta.py``: the constant, the key, the comment beside it, its section."""
    rows = ["| constant | key | meaning |", "|---|---|---|"]
    section = ""
    for line in (PACKAGE / "meta.py").read_text().splitlines():
        if line.startswith("# -- "):
            section = line.strip("# -").strip()
            rows.append(f"| **{section}** | | |")
        match = re.match(r'^([A-Z_]+) = "([a-z_]+)"\s*#\s*(.*)$', line)
        if match:
            name, key, doc = match.groups()
            rows.append(f"| `{name}` | `{key}` | {doc.replace('|', '/')} |")
    return "\n".join(rows)


def _stats_key(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                expr = ast.unparse(getattr(value, "value", value))
                parts.append("<" + expr.rsplit(".", 1)[-1].strip("()") + ">")
        text = "".join(parts)
    else:
        return None
    return text if re.fullmatch(r"larbin/[a-z0-9_]+/[<>a-z0-9_/.\[\]'\"-]+", text) else None


def stats_keys() -> dict[str, list[str]]:
    """Stats keys by component (``larbin/<component>/<event>``), from the package's code."""
    keys: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        nodes = list(ast.walk(ast.parse(path.read_text())))
        parts = {id(v) for n in nodes if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in nodes:
            key = None if id(node) in parts else _stats_key(node)
            if key:
                keys[key.split("/")[1]].add(key.split("/", 2)[2])
    return {component: sorted(events) for component, events in sorted(keys.items())}


def stats_table() -> str:
    rows = ["| component | events (`larbin/<component>/<event>`) |", "|---|---|"]
    for component, events in stats_keys().items():
        rows.append(f"| `{component}` | {', '.join(f'`{e}`' for e in events)} |")
    return "\n".join(rows)


TABLES = {"settings": settings_table, "meta": meta_table, "stats": stats_table}


def update(text: str) -> str:
    """``text`` with every generated block rewritten from the code."""
    return BLOCK.sub(lambda m: f"{m[1]}{TABLES[m[2]]()}\n{m[3]}", text)


if __name__ == "__main__":
    DESIGN.write_text(update(DESIGN.read_text()))
