"""Datasets by name: conf/dataset/<name>.yaml is the whole description of a dataset (its loader
`_target_` and arguments, and its properties: `task`, `variant`, `split`).

Code that names a dataset by a string (FilCo's train_data / eval_data, benchmarks, tests)
reads it here; a run's own dataset is the composed `dataset` node, built by Hydra."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ..configcheck import group_options
from ..named_configs import group_config
from ..paths import CONF_DIR
from .records import LMDoc, QARecord


def dataset_config(name: str, conf_dir: Path = CONF_DIR) -> DictConfig:
    """conf/dataset/<name>.yaml, unresolved (an unknown name lists the choices)."""

    return group_config("dataset", name, conf_dir)


def has_dataset(name: str, conf_dir: Path = CONF_DIR) -> bool:
    """Whether conf/dataset/<name>.yaml exists."""

    return name in group_options("dataset", conf_dir)


def dataset_property(name: str, key: str, conf_dir: Path = CONF_DIR) -> Any:
    """One key of conf/dataset/<name>.yaml (None when the file does not set it), e.g.
    `task` (nq, tqa, hotpotqa, eli5, fever, wow, qa, lm, ...) or `split`."""
    node = dataset_config(name, conf_dir)
    return OmegaConf.select(node, key, default=None) if key in node else None


def load_named(name: str, conf_dir: Path = CONF_DIR,
               **overrides: Any) -> list[QARecord] | list[LMDoc]:
    """The records of conf/dataset/<name>.yaml with `overrides` (split, limit, hops, path, ...)
    merged in; `limit` stands for the root `limit` the YAML interpolates."""
    limit = overrides.pop("limit", None)
    node = OmegaConf.merge({"limit": limit}, {"dataset": dataset_config(name, conf_dir)},
                           {"dataset": overrides})
    try:
        return list(instantiate(node.dataset, _convert_="all"))
    except InstantiationException as e:  # the loader's own error says what to do
        if e.__cause__ is not None:
            raise e.__cause__ from None
        raise
