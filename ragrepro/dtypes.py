"""The dtype a run's model loads in, from its config alone (no torch): `dtype: checkpoint`
means the checkpoint's declared one (`model.checkpoint_dtype`). Read by the loader
(ragrepro.models.lm), by the row's settings (ragrepro.runner) and by `ragrepro plan`."""
from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from .errors import ConfigError


def effective_dtype(dtype: str, checkpoint_dtype: str | None) -> str:
    """The dtype a model is loaded in: `checkpoint` means the checkpoint's declared one."""
    if dtype != "checkpoint":
        return dtype
    if not checkpoint_dtype:
        raise ConfigError("dtype=checkpoint needs model.checkpoint_dtype (the torch_dtype in "
                          "the checkpoint's config.json); set it or choose a dtype.")
    return checkpoint_dtype


def row_dtype(cfg: Any) -> str | None:
    """The dtype the model actually loads in (dtype=checkpoint resolved), for every row."""
    dtype = cfg.get("dtype")
    if dtype == "checkpoint":
        return OmegaConf.select(cfg, "model.checkpoint_dtype", default=None) or dtype
    return dtype
