"""FilCo's settings are typed components chosen by the filco/conf/filco/variant group: each file
builds its class, rows keep the names they had (`setting`, `method`, the switch label), and no
module but filco/variants.py compares a setting's name."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import OmegaConf

import filco
from filco.settings import variant_label
from filco.variants import FilCo, Full, Psg, Silver, Variant
from ragrepro.configcheck import group_options
from ragrepro.paths import CONF_DIR
from ragrepro.tracking import run_id_of


def _settings(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=filco/fig4_ladder", *overrides])
    return instantiate(cfg.filco, _convert_="object")


# file -> (class, row `setting`, row `method`, row `variant`): the values rows had before
ROWS = {
    "full": (Full, "full", "filco-full", "full"),
    "psg": (Psg, "psg", "filco-psg", "psg"),
    "filco": (FilCo, "filco", "filco", "filco"),
    "silver": (Silver, "silver", "filco-silver", "silver"),
    "filco_test_top1": (FilCo, "filco", "filco", "filco [switch fallback.test=top1]"),
    "filco_ctx_drop": (FilCo, "filco", "filco", "filco [switch fallback.ctx_target=drop]"),
}


def test_every_variant_file_is_listed():
    assert group_options("filco/variant") == sorted(ROWS)  # in filco/conf/filco/variant/


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_variant_file_builds_its_class_and_names_the_row_as_before(name):
    cls, setting, method, label = ROWS[name]
    fc = _settings(f"filco/variant={name}")
    assert type(fc.setting) is cls
    assert (fc.setting.name, fc.setting.method) == (setting, method)
    assert variant_label(fc.setting.name, fc.fallback.switches()) == label


def test_the_default_setting_is_filco_with_the_released_fallbacks():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=filco/table4"])
    fc = instantiate(cfg.filco, _convert_="object")
    assert type(fc.setting) is FilCo and fc.fallback.switches() == []


def test_an_unknown_variant_is_refused_by_the_config_group():
    with pytest.raises(HydraException, match="filcoo"):
        _settings("filco/variant=filcoo")


def test_what_each_setting_needs():
    # Full reads passages only; Psg labels its training set for M_psg; FilCo and Silver label
    # the test set too (Silver reads it, FilCo keeps it as the ctx_is_silver diagnostic) and
    # share the silver-trained generator
    needs = {cls.__name__: (cls.labels_train, cls.labels_test, cls.generator_role)
             for cls in (Full, Psg, FilCo, Silver)}
    assert needs == {"Full": (False, False, "gen-full"), "Psg": (True, False, "gen-psg"),
                     "FilCo": (True, True, "gen-silver"), "Silver": (True, True, "gen-silver")}
    assert Full() == Full() and Full() != Psg() and isinstance(Silver(), Variant)


NAMES = "full|psg|filco|silver"
# `== "psg"`, `!= 'full'`, `in ("silver", ...)`: a setting's name compared as a string
COMPARED = re.compile(rf"""(==|!=|\bin\b)\s*[(\[{{]?\s*["']({NAMES})["']""")


def test_no_module_but_variants_compares_a_setting_name():
    package = Path(filco.__file__).parent
    hits = [f"{p.name}: {line.strip()}" for p in sorted(package.glob("*.py"))
            if p.name != "variants.py"
            for line in p.read_text().splitlines() if COMPARED.search(line)]
    assert hits == []
    assert COMPARED.search('if setting == "psg":') and COMPARED.search("x in ('silver', 'filco')")


# Ids of the filco/fig4_ladder runs computed before the settings became components (when
# `filco.setting` was a plain name): the run id must not change with that refactor, or every
# finished FilCo run would be recomputed instead of reused.
IDS_BEFORE = {"full": "8f9575e661ac", "psg": "12cb2867bc90", "filco": "d3fe759c2401",
              "filco_test_top1": "425bb7751764", "filco_ctx_drop": "776e876ab06b"}


@pytest.mark.parametrize("name", sorted(IDS_BEFORE))
def test_a_component_setting_keeps_the_run_id_of_its_name(name):
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = compose("config", overrides=["experiment=filco/fig4_ladder",
                                           f"filco/variant={name}"])
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved["filco"]["setting"], dict)  # a component, hashed by its name
    assert run_id_of(resolved) == IDS_BEFORE[name]
