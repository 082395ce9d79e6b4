"""Configs chosen by name outside a composed run config: conf/<group>/<name>.yaml.

A run's components, second models included (a zero-shot scorer, the reranker's labelling
model and encoder), are composed by Hydra and handed to the pipeline; method packages never
read conf/. Benchmarks and scripts, which have no composed config, name a model or a fixed
corpus by a string: this is the one place that turns such a name into a config or a built
component, with a dtype and device filled in.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from .configcheck import group_options
from .errors import ConfigError, unknown_name
from .paths import CONF_DIR


def group_config(group: str, name: str, conf_dir: Path = CONF_DIR) -> DictConfig:
    """conf/<group>/<name>.yaml as loaded (unresolved); an unknown name lists the choices."""
    path = conf_dir / group / f"{name}.yaml"
    if not path.is_file():
        raise unknown_name(f"{group} config", name, group_options(group, conf_dir))
    cfg = OmegaConf.load(path)
    if not isinstance(cfg, DictConfig):
        raise ConfigError(f"{path} holds a list, not a mapping; write a {group} config as "
                          "`key: value` lines")
    return cfg


def model_config(name: str, dtype: str = "float32", device: str = "cpu",
                 conf_dir: Path = CONF_DIR) -> dict[str, Any]:
    """conf/model/<name>.yaml resolved with this dtype and device (its ${dtype}, ${device};
    ${attn_implementation} is null: transformers' choice, as in conf/config.yaml)."""
    node = OmegaConf.create({"dtype": dtype, "device": device, "attn_implementation": None,
                             "m": group_config("model", name, conf_dir)})
    out = OmegaConf.to_container(node.m, resolve=True)
    assert isinstance(out, dict)
    return out


def load_model(name: str, dtype: str = "float32", device: str = "cpu",
               conf_dir: Path = CONF_DIR) -> tuple[Any, dict[str, Any]]:
    """The LM of conf/model/<name>.yaml (instantiated) and its resolved config."""
    cfg = model_config(name, dtype, device, conf_dir)
    return instantiate(cfg), cfg
