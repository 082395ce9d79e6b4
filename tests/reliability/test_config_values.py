"""Issue 24 item 7: every value is checked before anything loads. The table is generated from
the settings dataclasses themselves (field types + the ranges each method declares with
ragrepro.validate.limits), so a new field is covered without editing this file; explicit rows
replay the commands a new user tried."""
import copy
import logging
import os
import pickle
import re
import subprocess
import sys
from dataclasses import fields, is_dataclass

import pytest
import warm_cli
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro.configcheck import group_options
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.validate import (
    RANGE,
    RootKeys,
    _hints,
    _kinds,
    check_values,
    config_errors,
    settings_nodes,
)

# Between them these compose every settings dataclass of ralm, riches and filco (checked below).
EXPERIMENTS = ("ralm/table1", "ralm/table4", "riches/main", "filco/fig4")
SCALARS = (bool, int, float, str, type(None))


@pytest.fixture(scope="module")
def composed():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return {e: compose("config", overrides=[f"experiment={e}"]) for e in EXPERIMENTS}


@pytest.fixture(scope="module")
def pickled(composed):
    """Each composed config as bytes: a fresh copy per test is pickle.loads, about 4x faster
    than copy.deepcopy of a DictConfig (measured: 3.8 against 15 ms for riches/main)."""
    return {e: pickle.dumps(cfg) for e, cfg in composed.items()}


def _wrong_values(hint, rng):
    """(value, refused?) rows for one field: a wrong type, a negative, a zero and values just
    outside the declared range; plus the range's own ends, which must pass."""
    kinds = set(_kinds(hint))
    if not kinds <= set(SCALARS):
        return []  # mappings, lists, callables, nested settings: not scalar rows
    rows = [("abc", not (str in kinds and not (rng and (rng.choices or rng.pattern))))]
    if type(None) not in kinds:
        rows.append((None, True))
    if bool not in kinds:
        rows.append((True, True))
    if rng and rng.choices:
        rows += [(c, False) for c in rng.choices]
    if not kinds & {int, float}:
        return [*rows, (3, True)]
    if float not in kinds:
        rows.append((2.5, True))
    bounds = [b for b in (rng.min, rng.max, rng.above) if b is not None] if rng else []
    candidates = {-1, 0, *bounds, *(b - 1 for b in bounds), *(b + 1 for b in bounds)}
    for v in sorted(candidates):
        v = int(v) if float not in kinds else v
        rows.append((v, bool(rng) and not rng.holds(v)))
    return rows


def _fields(prefix, cls):
    """(key, type, range) of a dataclass's fields, nested settings types included."""
    hints = _hints(cls)
    for f in fields(cls):
        nested = [k for k in _kinds(hints[f.name]) if is_dataclass(k)]
        if nested:
            yield from _fields(f"{prefix}{f.name}.", nested[0])
        else:
            yield prefix + f.name, hints[f.name], f.metadata.get(RANGE)


def _classes(cfgs):
    out = {RootKeys, *(c for cfg in cfgs for _, _, c in settings_nodes(cfg))}
    for cls in list(out):
        out |= {k for f in fields(cls) for k in _kinds(_hints(cls)[f.name]) if is_dataclass(k)}
    return out


def _table():
    """(experiment, key, value, refused?) for every scalar field of every settings node."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfgs = {e: compose("config", overrides=[f"experiment={e}"]) for e in EXPERIMENTS}
    rows, seen = [], set()
    for exp, cfg in cfgs.items():
        nodes = [("", RootKeys)] + [(f"{p}.", c) for p, _, c in settings_nodes(cfg)]
        for prefix, cls in nodes:
            for key, hint, rng in _fields(prefix, cls):
                if key in seen or key == "dtype":  # dtype: configcheck's own check (below)
                    continue
                seen.add(key)
                rows += [(exp, key, v, bad) for v, bad in _wrong_values(hint, rng)]
    return rows


TABLE = _table()


def _shown(value):
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return repr(value) if isinstance(value, str) else str(value)


@pytest.mark.parametrize("exp,key,value,refused", TABLE,
                         ids=[f"{k}={_shown(v)}" for _, k, v, _ in TABLE])
def test_every_key_checks_type_and_range(pickled, exp, key, value, refused):
    cfg = pickle.loads(pickled[exp])
    OmegaConf.update(cfg, key, value, merge=False)
    errors = [e for e in config_errors(cfg) if e.startswith(f"{key}=")]
    if refused:
        assert len(errors) == 1, f"{key}={value!r} accepted"
        assert errors[0].startswith(f"{key}={_shown(value)} must be ")
        with pytest.raises(ConfigError, match=re.escape(f"{key}={_shown(value)}")):
            check_values(cfg)
    else:
        assert errors == []


def test_table_covers_every_settings_dataclass(composed):
    import filco.settings
    import ralm.settings
    import riches.settings

    declared = {c for m in (ralm.settings, riches.settings, filco.settings)
                for c in vars(m).values()
                if isinstance(c, type) and is_dataclass(c) and c.__module__ == m.__name__}
    # RunSettings is built at run time from RalmSettings (RunSettings.of), never a config node.
    declared -= {ralm.settings.RunSettings}
    # a field-less variant class (ralm.rerank.First...) has no value to check
    found = {c for cfg in composed.values() for _, _, c in settings_nodes(cfg) if fields(c)}
    assert declared == found
    keys = {k for _, k, _, _ in TABLE}
    assert {"ralm.stride", "ralm.k", "qa.num_docs", "reranker.lr", "riches.beam_size",
            "riches.key.min_overlap", "riches.dense.k", "filco.k", "filco.cxmi.batch_size",
            "limit", "seed", "batch_size", "device", "resources.gpus"} <= keys


def test_every_numeric_setting_declares_its_range(composed):
    """A new int/float field must say what it allows (ragrepro.validate.limits)."""
    missing = []
    for cls in _classes(composed.values()):
        hints = _hints(cls)
        for f in fields(cls):
            if set(_kinds(hints[f.name])) & {int, float} and RANGE not in f.metadata:
                missing.append(f"{cls.__name__}.{f.name}")
    assert missing == []


def test_every_experiment_config_passes():
    exps = group_options("experiment")  # conf/ and every method's conf folder
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        bad = {e: config_errors(compose("config", overrides=[f"experiment={e}"])) for e in exps}
    assert {e: v for e, v in bad.items() if v} == {}
    assert len(exps) > 40


def test_unknown_key_in_a_settings_node_is_named(composed):
    cfg = copy.deepcopy(composed["ralm/table1"])
    OmegaConf.update(cfg, "ralm.strid", 4, force_add=True)
    with pytest.raises(ConfigError, match=r"ralm\.strid is not a setting of RalmSettings\. "
                                          r"Did you mean 'stride'"):
        check_values(cfg)


def _cli(args, results):
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled"}
    return warm_cli.run([*args], env=env, cwd=REPO_ROOT, timeout=300)


@pytest.mark.parametrize("override,message", [
    ("limit=abc", "limit='abc' must be a positive number of examples"),
    ("seed=x", "seed='x' must be an integer in 0..4294967295"),
    ("ralm.stride=abc", "ralm.stride='abc' must be an integer >= 1"),
    ("batch_size=-1", "batch_size=-1 must be an integer >= 1"),
    ("ralm.k=2.5", "ralm.k=2.5 must be an integer >= 1"),
    ("ralm.k=-3", "ralm.k=-3 must be an integer >= 1"),
    ("dtype=float99", "dtype='float99' is not supported"),
])
def test_bad_values_from_the_issue_exit_2_before_the_run_starts(tmp_path, override, message):
    out = _cli(["experiment=ralm/table1", override], tmp_path)
    log = out.stdout + out.stderr
    assert out.returncode == 2 and message in log, log[-2000:]
    assert "Traceback" not in log and "ragrepro.runner" not in log  # nothing started
    assert not (tmp_path / "ralm").exists()


def test_faiss_loader_lines_only_with_debug_logs():
    code = ("import logging, sys; logging.basicConfig(level=getattr(logging, sys.argv[1]));"
            "from ragrepro.cli import quiet_loaders; quiet_loaders(); import faiss")
    runs = {lvl: subprocess.run([sys.executable, "-c", code, lvl], capture_output=True,
                                text=True, timeout=120, check=True).stderr
            for lvl in ("INFO", "DEBUG")}
    assert "faiss.loader" not in runs["INFO"]
    assert "Loading faiss" in runs["DEBUG"]


def test_quiet_loaders_keeps_a_level_the_user_set():
    from ragrepro.cli import quiet_loaders

    logger = logging.getLogger("faiss.loader")
    before = logger.level
    try:
        logger.setLevel(logging.DEBUG)  # e.g. hydra.verbose=faiss.loader
        quiet_loaders()
        assert logger.level == logging.DEBUG
    finally:
        logger.setLevel(before)


@pytest.mark.parametrize("key,value,message", [
    ("filco.train.common.lr", "abc", "filco.train.common.lr='abc' must be a number."),
    ("filco.train.gen.max_steps", 2.5, "filco.train.gen.max_steps=2.5 must be an integer, or null."),
    ("filco.train.common.lora", "maybe", "filco.train.common.lora='maybe' must be true or false."),
])
def test_training_keys_are_checked_against_their_schema(composed, key, value, message):
    """filco.train.{common,ctx,gen,psg} are mappings whose keys are filco.train.TrainConfig's
    (declared with limits(schema=...)): their types are checked too."""
    cfg = copy.deepcopy(composed["filco/fig4"])
    OmegaConf.update(cfg, key, value, force_add=True)
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_values(cfg)


def test_root_nodes_keep_their_free_form_keys(composed):
    """wandb.* options go to W&B as they are (test_safety passes +wandb.api_key): only the
    declared root keys are checked, unknown ones are left alone."""
    cfg = copy.deepcopy(composed["ralm/table1"])
    OmegaConf.update(cfg, "wandb.notes", "first try", force_add=True)
    OmegaConf.update(cfg, "resources.partition", "gpu", force_add=True)
    assert config_errors(cfg) == []
    OmegaConf.update(cfg, "wandb.mode", "sometimes")
    assert config_errors(cfg) == [
        "wandb.mode='sometimes' must be one of online, offline, disabled, auto."]


def test_settings_nodes_walks_the_composed_tree_not_its_interpolations():
    """Found: a settings node (with its path), one in a list, one whose `_target_` is itself
    interpolated; skipped: a node that is an interpolation of another (found where it lives),
    a missing value, a target that is not a dataclass."""
    target = "ralm.settings.RerankerSettings"
    cfg = OmegaConf.create({
        "names": {"t": target},
        "a": {"_target_": target, "inner": {"x": 1}},
        "alias": "${a}",
        "lst": [{"_target_": target}, 3],
        "via": {"_target_": "${names.t}"},
        "gone": "???",
        "loader": {"_target_": "ragrepro.models.lm.load_lm"},
    })
    found = [(path, cls.__name__) for path, _, cls in settings_nodes(cfg)]
    assert found == [("a", "RerankerSettings"), ("lst.0", "RerankerSettings"),
                     ("via", "RerankerSettings")]
    (_, node, _), *_ = settings_nodes(cfg)
    assert OmegaConf.is_config(node) and node.inner.x == 1  # the node itself, for its checks
