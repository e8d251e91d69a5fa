"""Every private Scrapy/Twisted/redis-py name the project uses sits behind the lean/ wall
(issues #23, #32).

Outside ``larbinscrapy/lean/`` no module imports a private module or name of Scrapy, Twisted or
redis-py, or reaches for a private attribute of the engine or of a redis-py client;
``lean/private.py`` and ``lean/rediscluster.py`` hand the stages what they need and their checks
say, in one warning, when the installed versions changed it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re

from larbinscrapy.lean import private, rediscluster
from larbinscrapy.politeness import failures
from tests.support.crawl import ROOT

# `from twisted.web import _newclient`, `from scrapy.x._y import`, `obj._slot`, `Cls._private(`
_PRIVATE_IMPORT = re.compile(
    r"^\s*(?:from\s+(?:scrapy|twisted|redis)[\w.]*\s+import\s+\(?\s*_\w|"
    r"from\s+(?:scrapy|twisted|redis)[\w.]*\._\w|import\s+(?:scrapy|twisted|redis)[\w.]*\._\w)",
    re.MULTILINE,
)
# the engine's private attributes, and redis-py's that a cluster client's pipelines need
_PRIVATE_ENGINE = re.compile(
    r"\bengine\)?\._\w|\"_slot\"|\bsuper\(\)\._(?!_)\w|\._policy_resolver\b|\._nodes_manager\b"
)


def _outside_the_wall() -> dict[str, str]:
    package = ROOT / "larbinscrapy"
    return {
        str(p.relative_to(ROOT)): p.read_text()
        for p in sorted(package.rglob("*.py"))
        if "lean" not in p.relative_to(package).parts
    }


def test_no_module_outside_lean_names_a_private_scrapy_or_twisted_name():
    found = {
        name: m.group(0).strip()
        for name, text in _outside_the_wall().items()
        for m in [_PRIVATE_IMPORT.search(text) or _PRIVATE_ENGINE.search(text)]
        if m
    }
    assert not found, found


def test_the_patterns_see_what_they_look_for():
    # the test above could fail: each shape the project used before the wall is caught
    for line in (
        "from twisted.web import _newclient",
        "from scrapy.utils._download_handlers import x",
        "import twisted.web._newclient",
    ):
        assert _PRIVATE_IMPORT.search(line), line
    for line in (
        'slot = getattr(self._engine(), "_slot", None)',
        "super()._redirect(r, q, s)",
        "pipe._policy_resolver = self._policy_resolver",
    ):
        assert _PRIVATE_ENGINE.search(line), line
    assert _PRIVATE_IMPORT.search("from redis._parsers.commands import CommandPolicies")


def test_the_installed_scrapy_and_twisted_have_every_private_name():
    assert private.check() == []
    assert failures.RESPONSE_FAILED.__module__ == "twisted.web._newclient"


def test_the_installed_redis_py_has_every_private_name_the_cluster_client_uses():
    assert rediscluster.check() == []
    assert rediscluster.usable()


def test_a_changed_redis_py_name_is_one_warning_and_redis_pys_own_client(caplog, monkeypatch):
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.lean.rediscluster"):
        found = rediscluster.check(
            (
                ("redis.cluster", "RedisCluster.pipeline", "000000000000"),
                ("redis._parsers.commands", "NoSuchPolicy"),
            )
        )
    assert len(found) == 2
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    built = []
    monkeypatch.setattr(rediscluster, "usable", lambda: False)
    monkeypatch.setattr(
        rediscluster.RedisCluster,
        "from_url",
        classmethod(lambda cls, url, **kw: built.append((cls, kw)) or cls),
    )
    assert rediscluster.cluster_client("redis://127.21.0.1:1") is rediscluster.RedisCluster
    assert built == [(rediscluster.RedisCluster, {})]  # no policy resolver: redis-py's defaults


def test_a_changed_private_name_is_one_warning_naming_it(caplog):
    with caplog.at_level(logging.WARNING, logger="larbinscrapy.lean.private"):
        found = private.check(
            (
                ("scrapy.core.engine", "_Slot.__init__", "000000000000"),
                ("twisted.web._newclient", "NoSuchClass"),
            )
        )
    assert len(found) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "_Slot.__init__" in warnings[0].getMessage()
    assert "NoSuchClass" in warnings[0].getMessage()


def test_waking_an_engine_without_the_private_slot_is_a_no_op():
    class Engine:
        pass

    class Slot:
        woken = 0

        class nextcall:
            @staticmethod
            def schedule() -> None:
                Slot.woken += 1

    private.wake_engine(None)
    private.wake_engine(Engine())
    engine = Engine()
    engine._slot = Slot()  # type: ignore[attr-defined]
    private.wake_engine(engine)
    assert Slot.woken == 1


_ASSIGNED = re.compile(r"self\.(_[a-z]\w*)\s*(?::[^=\n]+)?=(?!=)")
_READ = re.compile(r"self\.(_[a-z]\w*)\b")


def _parent_privates(cls: type) -> dict[str, str]:
    """Private attributes the Scrapy/Twisted classes above ``cls`` set on ``self``."""
    found: dict[str, str] = {}
    for base in cls.__mro__[1:]:
        if base.__module__.split(".")[0] in ("scrapy", "twisted"):
            try:
                source = inspect.getsource(base)
            except (OSError, TypeError):
                continue
            for name in _ASSIGNED.findall(source):
                found.setdefault(name, f"{base.__module__}.{base.__qualname__}")
    return found


def test_no_class_outside_lean_reads_a_private_attribute_its_scrapy_parent_sets():
    wrong = {}
    for path in sorted((ROOT / "larbinscrapy").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if "lean" in parts:
            continue
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        for cls in vars(module).values():
            if not isinstance(cls, type) or cls.__module__ != module.__name__:
                continue
            inherited = _parent_privates(cls)
            if not inherited:
                continue
            source = inspect.getsource(cls)
            own = set(_ASSIGNED.findall(source))
            for name in set(_READ.findall(source)) - own:
                if name in inherited:
                    wrong[f"{cls.__module__}.{cls.__qualname__}.{name}"] = inherited[name]
    assert not wrong, wrong
