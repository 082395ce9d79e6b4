"""Checks that run before anything is loaded, so a typo costs seconds, not a model load."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from .errors import ConfigError, did_you_mean
from .paths import CONF_DIR

CHECKED_GROUPS = ("experiment", "model", "dataset", "retriever", "scorer", "reranker",
                  "riches/method")
DTYPES = ("float32", "bfloat16", "float16", "checkpoint")  # checkpoint: model.checkpoint_dtype


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    base = conf_dir / group
    return sorted(str(p.relative_to(base).with_suffix("")) for p in base.rglob("*.yaml"))


def check_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Unknown config-group choices on the command line, with did-you-mean suggestions."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep or key not in CHECKED_GROUPS or value in ("null", ""):
            continue
        options = group_options(key, conf_dir)
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
    limit = cfg.get("limit")
    if limit is not None and int(limit) <= 0:
        raise ConfigError(f"limit={limit} must be a positive number of examples, or null.")
