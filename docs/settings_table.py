"""The README's settings table, generated from ``settings/base.py`` (the one source).

``python docs/settings_table.py`` rewrites the table after the ``<!-- settings-table -->``
marker; ``tests/test_readme.py`` checks that the README matches.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- settings-table -->"


def rows(path: Path = ROOT / "settings" / "base.py") -> list[tuple[str, str, str]]:
    """(name, default as written, comment) for every top-level setting, in file order."""
    source = path.read_text()
    comments = {tok.start[0]: tok.string.lstrip("# ").strip()
                for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    out = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if not name.isupper():
            continue
        value = " ".join(ast.get_source_segment(source, node.value).split())
        if len(value) > 60:
            value = value[:57] + "..."
        comment = comments.get(node.lineno) or comments.get(node.end_lineno or node.lineno, "")
        out.append((name, value, comment))
    return out


def table() -> str:
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    for name, value, comment in rows():
        lines.append(f"| `{name}` | `{value.replace('|', '¦')}` | {comment.replace('|', '¦')} |")
    return "\n".join(lines) + "\n"


def readme_with_table(readme: str) -> str:
    head, sep, _ = readme.partition(MARKER)
    if not sep:
        raise ValueError(f"README.md has no {MARKER} marker")
    return head + MARKER + "\n\n" + table()


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(readme_with_table(path.read_text()))
    sys.exit(0)
