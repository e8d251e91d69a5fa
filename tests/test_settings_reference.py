"""Every setting declared once (conf/defaults.py), checked by its declaration, documented.

The declarations are the one source: docs/settings.md is generated from them, every
``LARBIN_*`` name the code reads is declared (and read with the getter of its declared kind),
and ``larbinscrapy.conf.check.check`` turns a wrong value into one line naming the setting, the
value and what it takes.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
from scrapy.settings import Settings

from larbinscrapy.conf import check as config
from larbinscrapy.conf.defaults import SETTINGS
from tests.support.crawl import ROOT

LARBIN = {name: spec for name, spec in SETTINGS.items() if name.startswith("LARBIN_")}
GETTERS = {"getbool": bool, "getint": int, "getfloat": float}


def _settings_table():
    spec = importlib.util.spec_from_file_location(
        "settings_table", ROOT / "docs" / "settings_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code() -> str:
    return "\n".join(
        p.read_text()
        for p in sorted((ROOT / "larbinscrapy").rglob("*.py"))
        if p.name != "defaults.py"
    )


def _with(**values: object) -> Settings:
    settings = Settings()
    settings.setdict({name: spec.default for name, spec in SETTINGS.items()}, "addon")
    settings.setdict(values, "cmdline")
    return settings


def test_docs_settings_md_is_up_to_date():
    table = _settings_table()
    assert (ROOT / "docs" / "settings.md").read_text() == table.render(), (
        "docs/settings.md is stale: run python docs/settings_table.py"
    )


def test_every_setting_has_a_meaning_and_every_larbin_one_a_type_and_range():
    assert [name for name, spec in SETTINGS.items() if not spec.doc] == []
    untyped = [name for name, spec in LARBIN.items() if spec.kind is None and not spec.parse]
    assert untyped == []
    numbers = [spec for spec in LARBIN.values() if spec.kind in (int, float)]
    assert [
        s.name for s in numbers if (s.min, s.max, s.above, s.below) == (None, None, None, None)
    ] == []
    assert all(spec.describe() for spec in LARBIN.values())


def test_every_default_passes_its_own_check():
    assert config.check(_with()) == []


def test_every_larbin_name_the_code_reads_is_declared_and_every_declared_one_read():
    code = _code()
    used = set(re.findall(r'"(LARBIN_[A-Z0-9_]+)"', code))
    assert sorted(used - set(LARBIN)) == []
    assert sorted(set(LARBIN) - used) == []


def test_each_setting_is_read_with_the_getter_of_its_kind():
    reads = re.findall(r'\.(getbool|getint|getfloat)\(\s*"(LARBIN_[A-Z0-9_]+)"', _code())
    assert reads
    wrong = sorted(
        {(name, getter) for getter, name in reads if LARBIN[name].kind is not GETTERS[getter]}
    )
    assert wrong == []


@pytest.mark.parametrize(
    ("name", "value", "takes"),
    [
        ("LARBIN_DUPEFILTER_MODE", "nonsense", "one of 'scalable', 'bloom', 'bitmap'"),
        ("LARBIN_IP_DELAY", "abc", "a number >= 0"),
        ("LARBIN_IP_DELAY", "-1", "a number >= 0"),
        ("LARBIN_RESOLVE", "not a mapping", "a mapping of host to IP"),
        ("LARBIN_RESOLVE", '{"h.test": "not-an-ip"}', "a mapping of host to IP"),
        ("LARBIN_FRONTIER_URLS_PER_SITE_MAX", "-5", "an integer >= 1"),
        ("LARBIN_GATE_CGI_LEVEL", "3", "an integer from 0 to 2"),
        ("LARBIN_DUPEFILTER_ERROR_RATE", "1", "a number > 0 and < 1"),
        ("LARBIN_EXTERNAL", "maybe", "true or false"),
        ("LARBIN_ALLOWED_NETWORKS", "127.0.0.0/33", "comma-separated networks"),
        ("LARBIN_STATUS_PORT", "99999", "a port"),
        ("LARBIN_REDIS_FRONTIER_KEY", "%(spidr)s:frontier", "a key template"),
        ("LARBIN_FETCH_HANDLER", "no.such.Handler", "the import path"),
    ],
)
def test_a_wrong_value_is_one_message_naming_setting_value_and_what_it_takes(name, value, takes):
    with pytest.raises(config.SettingsError) as caught:
        config.check(_with(**{name: value}))
    message = str(caught.value)
    assert message == f"setting {name}={value!r} is not valid: it takes {SETTINGS[name].describe()}"
    assert takes in message


NUMBERS = sorted(name for name, spec in SETTINGS.items() if spec.kind in (int, float))


@pytest.mark.parametrize("name", NUMBERS)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", float("inf"), float("nan")])
def test_no_number_takes_inf_or_nan(name, value):
    # issue 34: DOWNLOAD_DELAY=inf hung the crawl, LARBIN_IP_DELAY=inf was silently capped
    with pytest.raises(config.SettingsError, match=f"setting {name}="):
        config.check(_with(**{name: value}))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DOWNLOAD_DELAY", "-1"),
        ("DOWNLOAD_TIMEOUT", "0"),
        ("DOWNLOAD_TIMEOUT", "-1"),
        ("CONCURRENT_REQUESTS", "0"),
        ("CONCURRENT_REQUESTS_PER_DOMAIN", "0"),
        ("DEPTH_LIMIT", "-1"),
        ("DOWNLOAD_MAXSIZE", "-1"),
        ("RETRY_TIMES", "-1"),
        ("AUTOTHROTTLE_START_DELAY", "-1"),
        ("AUTOTHROTTLE_MAX_DELAY", "-1"),
        ("AUTOTHROTTLE_TARGET_CONCURRENCY", "0"),
        ("AUTOTHROTTLE_ENABLED", "maybe"),
        ("CONCURRENT_REQUESTS", "1.5"),
        ("URLLENGTH_LIMIT", "0"),
        ("DNS_TIMEOUT", "0"),
    ],
)
def test_scrapys_settings_the_crawl_relies_on_are_checked(name, value):
    with pytest.raises(config.SettingsError) as caught:
        config.check(_with(**{name: value}))
    assert str(caught.value).startswith(f"setting {name}={value!r} is not valid: it takes ")


def test_every_number_the_crawl_relies_on_is_declared_with_a_range():
    relied = [
        "DOWNLOAD_DELAY",
        "DOWNLOAD_TIMEOUT",
        "CONCURRENT_REQUESTS",
        "CONCURRENT_REQUESTS_PER_DOMAIN",
        "DEPTH_LIMIT",
        "DOWNLOAD_MAXSIZE",
        "RETRY_TIMES",
        "AUTOTHROTTLE_START_DELAY",
        "AUTOTHROTTLE_MAX_DELAY",
        "AUTOTHROTTLE_TARGET_CONCURRENCY",
    ]
    for name in relied:
        spec = SETTINGS[name]
        assert spec.kind in (int, float), name
        assert (spec.min, spec.above) != (None, None), name


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LARBIN_IP_DELAY", "0"),
        ("LARBIN_IP_DELAY", 2),
        ("LARBIN_EXTERNAL", "false"),
        ("LARBIN_RESOLVE", '{"h.test": "127.0.0.1"}'),
        ("LARBIN_RESOLVE", "h.test:127.0.0.1"),
        ("LARBIN_STATUS_PORT", "0"),
        ("LARBIN_STATUS_PORT", "8081,8181"),
        ("LARBIN_DOMAINS", ["a.org"]),
        ("LARBIN_DUPEFILTER_MODE", "bitmap"),
        ("LARBIN_SEEDS", None),
    ],
)
def test_a_good_value_passes(name, value):
    assert config.check(_with(**{name: value})) == []


def test_several_wrong_values_are_named_on_one_line():
    # LARBIN_DEPTH=-1 is "no limit" (UrlFilter): -2 is the first wrong value
    with pytest.raises(config.SettingsError) as caught:
        config.check(_with(LARBIN_IP_DELAY="abc", LARBIN_DEPTH="-2"))
    assert "LARBIN_IP_DELAY" in str(caught.value) and "LARBIN_DEPTH" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_name_is_a_warning_naming_the_closest_known_one():
    warnings = config.check(_with(LARBIN_IP_DELAI=1, LARBIN_NOTHING_LIKE_IT=2))
    assert warnings == [
        "unknown setting LARBIN_IP_DELAI ignored (did you mean LARBIN_IP_DELAY?)",
        "unknown setting LARBIN_NOTHING_LIKE_IT ignored (docs/settings.md lists the known ones)",
    ]


def test_settings_without_the_addon_say_how_to_install_it():
    with pytest.raises(config.SettingsError, match=r"add ADDONS = \{\"larbinscrapy.addon"):
        config.check(Settings())
