"""Prose that serves (issue 32, point 5): short docstrings, short functions, a short design.

An AST scan of the package: a docstring (module, class or function) says what and why in at
most 15 lines; a function is at most 60 lines, and at most 5 run over 40. docs/DESIGN.md reads
in one sitting (<= 600 lines) and its generated tables match the code (docs/design_tables.py).
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "larbinscrapy"
DOCSTRING_LINES = 15
FUNCTION_LINES = 60
LONG_FUNCTION_LINES = 40
LONG_FUNCTIONS = 5
DESIGN_LINES = 600

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)


def _nodes():
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            yield path.relative_to(ROOT), node


def _docstring_lines(node: ast.AST) -> int:
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr):
        return 0
    value = body[0].value
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return 0
    return len(value.value.strip().splitlines())


def _name(path: Path, node: ast.AST) -> str:
    return f"{path}:{getattr(node, 'lineno', 1)} {getattr(node, 'name', '(module)')}"


def _function_lengths() -> dict[str, int]:
    return {
        _name(path, node): node.end_lineno - node.lineno + 1
        for path, node in _nodes()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
    }


def test_docstrings_are_at_most_15_lines():
    long = sorted(
        f"{_name(path, node)}: {lines} lines"
        for path, node in _nodes()
        if isinstance(node, _DEFS) and (lines := _docstring_lines(node)) > DOCSTRING_LINES
    )
    assert long == []


def test_functions_are_at_most_60_lines():
    long = sorted(
        f"{name}: {n} lines" for name, n in _function_lengths().items() if n > FUNCTION_LINES
    )
    assert long == []


def test_at_most_5_functions_run_over_40_lines():
    long = sorted(
        f"{name}: {n} lines" for name, n in _function_lengths().items() if n > LONG_FUNCTION_LINES
    )
    assert len(long) <= LONG_FUNCTIONS, long


def test_design_reads_in_one_sitting():
    lines = (ROOT / "docs" / "DESIGN.md").read_text().count("\n")
    assert lines <= DESIGN_LINES


def test_the_design_tables_are_generated_from_the_code():
    spec = importlib.util.spec_from_file_location(
        "design_tables", ROOT / "docs" / "design_tables.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    assert module.update(text) == text, "docs/DESIGN.md is stale: run python docs/design_tables.py"
