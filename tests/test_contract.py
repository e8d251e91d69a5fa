"""The stage map as a contract in code (issue #32).

* ``lint-imports`` keeps the layers of ``[tool.importlinter]`` (pyproject.toml): the stages in
  order, the adapters above their pure cores, the lean wall, the shared names at the bottom.
* No cycle between subpackages, counting imports inside functions and under ``TYPE_CHECKING``
  (a deferred import, a type, is still a dependency): grimp builds the graph, and the synthetic
  package below shows that it sees both kinds.
* Components find each other through declared interfaces: no ``getattr``/``hasattr`` with a
  literal name outside ``lean/``, but on objects that are not components (``_NOT_COMPONENTS``).
* A middleware class that moved still loads from the path users' settings may name.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import grimp
import pytest
from scrapy.exceptions import ScrapyDeprecationWarning

from tests.support.crawl import ROOT

# (the object's last name, the attribute): why it is not another component's interface
_NOT_COMPONENTS = {
    ("spider", "on_error"): "a user's spider: the errback by larbin's convention, if it has one",
    ("spider", "state"): "a user's spider: Scrapy's SpiderState sets `state` on it",
    ("spider", "name"): "a spider class: Scrapy's own convention, a class may lack it",
    ("crawler", "spidercls"): "Scrapy's Crawler: a hand-built one (tests) may lack it",
    ("exc", "reason"): "an exception (URLError and others): `reason` where there is one",
    ("exc", "reasons"): "an exception (Twisted's ResponseFailed): its wrapped failures",
    ("r", "value"): "a Twisted Failure or a plain exception among those reasons",
    ("func", "__name__"): "a spider's callback: a bound method, or any callable",
    ("func", "__self__"): "a spider's callback: bound to the spider or not",
    ("response", "request"): "a Response or a Failure (item signals hand either)",
    ("file", "closed"): "a feed slot's file object, of whatever storage",
    ("reactor", "resolver"): "Twisted's reactor: IReactorPluggableNameResolver, if provided",
}


def _subpackage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _cycles(graph: grimp.ImportGraph, package: str) -> dict[tuple[str, str], list[str]]:
    """Each pair of subpackages that import each other (directly or not), with one import
    of each direction as a witness."""
    edges: dict[str, set[str]] = defaultdict(set)
    witness: dict[tuple[str, str], str] = {}
    for module in graph.modules:
        if not module.startswith(package):
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _subpackage(module), _subpackage(imported)
            if a != b and imported.startswith(package):
                edges[a].add(b)
                witness.setdefault((a, b), f"{module} -> {imported}")

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return seen

    reachable = {node: reach(node) for node in list(edges)}
    far = "(through others)"
    return {
        (a, b): [witness.get((a, b), far), witness.get((b, a), far)]
        for a in reachable
        for b in reachable[a]
        if a < b and a in reachable.get(b, ())
    }


def test_the_stage_layers_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"  # import-linter's command
    result = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_no_cycle_between_subpackages_counting_deferred_and_type_only_imports():
    graph = grimp.build_graph("larbinscrapy", cache_dir=None)
    assert _cycles(graph, "larbinscrapy") == {}


def test_the_cycle_count_sees_deferred_and_type_only_imports(tmp_path, monkeypatch):
    # the test above could fail: a cycle made only of a function-level import and a
    # TYPE_CHECKING one is found
    root = tmp_path / "cyclepkg"
    for sub in ("a", "b", "c"):
        (root / sub).mkdir(parents=True)
        (root / sub / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "m.py").write_text("def f():\n    from cyclepkg.b import m\n    return m\n")
    (root / "b" / "m.py").write_text(
        textwrap.dedent("""\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from cyclepkg.a import m
        """)
    )
    (root / "c" / "m.py").write_text("import cyclepkg.a.m\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclepkg", cache_dir=None)
    assert set(_cycles(graph, "cyclepkg")) == {("a", "b")}


def _literal_lookups(path: Path) -> list[tuple[int, str, str, str]]:
    """(line, function, object's last name, attribute) of each getattr/hasattr with a literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            target = node.args[0]
            name = (
                target.attr
                if isinstance(target, ast.Attribute)
                else target.id
                if isinstance(target, ast.Name)
                else ast.unparse(target)
            )
            found.append((node.lineno, node.func.id, name, node.args[1].value))
    return found


def test_no_component_is_reached_by_a_literal_attribute_name_outside_lean():
    package = ROOT / "larbinscrapy"
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {func}({name}, {attr!r})"
        for path in sorted(package.rglob("*.py"))
        if "lean" not in path.relative_to(package).parts
        for line, func, name, attr in _literal_lookups(path)
        if (name, attr) not in _NOT_COMPONENTS
    ]
    assert not wrong, "\n".join(wrong)


def test_the_lookup_scan_sees_what_it_looks_for(tmp_path):
    source = tmp_path / "x.py"
    source.write_text(
        'a = getattr(crawler.engine.scheduler, "df", None)\nb = hasattr(self.spider, "on_error")\n'
    )
    assert [(n, a) for _, _, n, a in _literal_lookups(source)] == [
        ("scheduler", "df"),
        ("spider", "on_error"),
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("larbinscrapy.status.gate.PauseGate", "larbinscrapy.middlewares.pause.PauseGate"),
        (
            "larbinscrapy.fetch.checktype.ContentTypeMiddleware",
            "larbinscrapy.middlewares.checktype.ContentTypeMiddleware",
        ),
        (
            "larbinscrapy.fetch.checktype.BoundedDecompressionMiddleware",
            "larbinscrapy.middlewares.checktype.BoundedDecompressionMiddleware",
        ),
        (
            "larbinscrapy.revisit.middleware.ConditionalGetMiddleware",
            "larbinscrapy.middlewares.conditional.ConditionalGetMiddleware",
        ),
    ],
)
def test_a_moved_middleware_loads_from_its_old_path_with_a_warning(old, new):
    from scrapy.utils.misc import load_object

    with pytest.warns(ScrapyDeprecationWarning, match=new.replace(".", r"\.")):
        assert load_object(old) is load_object(new)


def test_an_unknown_name_of_an_old_module_is_still_an_attribute_error():
    from larbinscrapy.fetch import checktype

    with pytest.raises(AttributeError):
        checktype.NoSuchMiddleware  # noqa: B018


def test_both_schedulers_offer_the_frontier_interface_and_their_dupefilters_the_seen_set():
    from larbinscrapy.distributed.dupefilter import RedisBitmapDupeFilter
    from larbinscrapy.distributed.scheduler import RedisScheduler
    from larbinscrapy.frontier import Frontier
    from larbinscrapy.frontier.scheduler import LarbinScheduler
    from larbinscrapy.seen import SeenSet
    from larbinscrapy.seen.dupefilter import BitmapDupeFilter

    members = {
        "seen",
        "robots",
        "sitemaps",
        "enqueue_request",
        "status",
        "host_set_aside",
        "count_items",
    }
    assert all(hasattr(Frontier, m) for m in members)
    for scheduler in (LarbinScheduler, RedisScheduler):
        missing = {m for m in members if not hasattr(scheduler, m)}
        assert not missing, (scheduler, missing)
    for dupefilter in (
        BitmapDupeFilter(bits=1 << 16),
        RedisBitmapDupeFilter(None, "t:seen", mode="bitmap", bits=1 << 16),
    ):
        assert isinstance(dupefilter, SeenSet), dupefilter
