"""Setting names that explain themselves (issue 32, point 4), old names kept as aliases.

One component per prefix (``LARBIN_STATUS_*`` is the status page, ``LARBIN_FETCH_*`` the
download handler, ``LARBIN_GATE_*`` the link gate), bounds end in ``_MAX``/``_MIN``, Scrapy's
name where Scrapy has the meaning (``URLLENGTH_LIMIT``, ``DNS_TIMEOUT``). A setting renamed
declares its old name (``old=``) in ``conf/defaults.py``: a value set under the old name still
works and is warned about once per crawl.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from scrapy.settings import Settings

from larbinscrapy.conf import check as config
from larbinscrapy.conf.defaults import SETTINGS
from tests.support.crawl import ROOT

RENAMED = {spec.old: name for name, spec in SETTINGS.items() if spec.old}


def _with(priority: str = "cmdline", **values: object) -> Settings:
    settings = Settings()
    settings.setdict({name: spec.default for name, spec in SETTINGS.items()}, "addon")
    settings.setdict(values, priority)
    return settings


def test_bounds_end_in_max_or_min_and_no_prefix_is_a_bound():
    wrong = [
        name
        for name in SETTINGS
        if name.startswith("LARBIN_")
        and (name.startswith(("LARBIN_MAX_", "LARBIN_MIN_")) or re.search(r"_(MAX|MIN)_", name))
    ]
    assert wrong == []


def test_one_component_per_prefix():
    # LARBIN_HTTP_* named the status page and the download handler; the gate's URL cache sat
    # under the seen-set's LARBIN_DUPEFILTER_*.
    names = set(SETTINGS)
    assert [n for n in names if n.startswith(("LARBIN_HTTP_", "LARBIN_HTTP1_"))] == []
    assert "LARBIN_GATE_URL_CACHE" in names
    assert "LARBIN_STATUS_PORT" in names and "LARBIN_FETCH_HANDLER" in names
    # Scrapy's names where Scrapy has the meaning
    assert {"URLLENGTH_LIMIT", "DNS_TIMEOUT", "DEPTH_LIMIT"} <= names


def test_every_old_name_is_an_alias_of_one_new_name_and_no_code_reads_it():
    assert len(RENAMED) == len({spec.old for spec in SETTINGS.values() if spec.old})
    assert not set(RENAMED) & set(SETTINGS)
    code = "\n".join(
        p.read_text()
        for p in sorted((ROOT / "larbinscrapy").rglob("*.py"))
        if p.name != "defaults.py"
    )
    assert sorted(old for old in RENAMED if re.search(rf"\b{old}\b", code)) == []


@pytest.mark.parametrize(
    ("old", "value", "read"),
    [
        ("LARBIN_MAX_URLS_PER_SITE", "7", 7),
        ("LARBIN_HTTP_PORT", "0", "0"),
        ("LARBIN_DUPEFILTER_URL_CACHE", "0", "0"),
        ("LARBIN_MAX_URL_LENGTH", "300", "300"),
        ("LARBIN_REVISIT_MIN", "60", "60"),
    ],
)
def test_a_value_under_the_old_name_is_read_under_the_new_one_with_one_warning(old, value, read):
    settings = _with(**{old: value})
    warnings = config.check(settings)
    new = RENAMED[old]
    assert settings[new] == read or str(settings[new]) == str(read)
    assert warnings == [
        f"setting {old} is deprecated: it is now {new} (the old name still works, for now)"
    ]


def test_the_new_name_wins_when_both_are_set_at_the_same_priority():
    settings = _with("project", LARBIN_MAX_URLS_PER_SITE=7, LARBIN_FRONTIER_URLS_PER_SITE_MAX=9)
    config.check(settings)
    assert settings.getint("LARBIN_FRONTIER_URLS_PER_SITE_MAX") == 9


def test_a_wrong_value_under_the_old_name_is_named_by_the_new_name():
    with pytest.raises(config.SettingsError, match="LARBIN_FRONTIER_URLS_PER_SITE_MAX='-5'"):
        config.check(_with(LARBIN_MAX_URLS_PER_SITE="-5"))


def test_the_reference_lists_the_old_names():
    text = (ROOT / "docs" / "settings.md").read_text()
    assert all(f"was `{old}`" in text for old in RENAMED)


# Files that name old settings on purpose: the declarations, the reference, the alias tests.
_MAY_NAME_OLD = {
    "larbinscrapy/conf/defaults.py",
    "docs/settings.md",
    "tests/test_settings_names.py",
    "tests/test_settings_errors.py",
}
_TEXT = (".py", ".md", ".cfg", ".toml", ".txt", ".sh", ".html", ".js", "")


def _project_files():
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules",)]
        for name in files:
            path = Path(top, name)
            if path.suffix in _TEXT and not name.startswith("."):
                yield path, path.relative_to(ROOT).as_posix()


def test_no_file_of_the_project_uses_an_old_name():
    # Every reader moved to the new names: the package, tests, benchmarks, testweb and docs.
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, RENAMED)) + r")\b")
    found = []
    for path, rel in _project_files():
        if rel in _MAY_NAME_OLD:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{rel}: {m}" for m in sorted(set(pattern.findall(text)))]
    assert found == []
