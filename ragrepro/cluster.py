"""What one sweep cell asks from a cluster (GPUs, CPUs, memory, time), derived from its
experiment config, and which cells of a sweep still need to run.

Pure functions over resolved config dicts, so the launchers (ragrepro/launchers/) and the
tests share them without a cluster.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

# Parameter counts (billions) of models whose names carry no size.
KNOWN_SIZES_B = {"gpt2": 0.124, "gpt2-medium": 0.355, "gpt2-large": 0.774, "gpt2-xl": 1.56,
                 "flan-t5-xl": 2.85, "tiny-t5-random": 0.001}
BYTES_PER_PARAM = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}
# Weights are not all of it: activations, the KV cache and CUDA context need headroom.
GPU_OVERHEAD = 1.2
# Loading a checkpoint holds the weights in host memory once more while they are moved.
HOST_OVERHEAD = 1.5
_SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)([mb])(?![a-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Resources:
    """One cell's request; the same request means the same Slurm job array."""

    gpus: int
    cpus: int
    mem_gb: int
    timeout_min: int


def model_size_b(model: Mapping[str, Any]) -> float:
    """Parameters in billions: `model.params_b` if set, else read from the model name."""
    if model.get("params_b") is not None:
        return float(model["params_b"])
    name = str(model.get("name") or "")
    if name in KNOWN_SIZES_B:
        return KNOWN_SIZES_B[name]
    match = _SIZE.search(name)
    if match is None:
        raise ConfigError(f"Cannot tell the size of model {name!r} from its name, so the "
                          f"cluster request is unknown. Set `+model.params_b=<billions>` or "
                          f"`resources.gpus=<n>` (and resources.cpus, resources.mem_gb).")
    value = float(match.group(1))
    return value / 1000 if match.group(2).lower() == "m" else value


def _auto(value: Any) -> bool:
    return value is None or str(value) == "auto"


def resources_for(cfg: Mapping[str, Any]) -> Resources:
    """GPUs from the weights' size at the run's dtype; CPU-only at mini scale.

    `resources.{gpus,cpus,mem_gb,timeout_min}` in the config win over the estimate, which
    is: gpus = ceil(params * bytes/param * 1.2 / gpu_mem_gb), cpus = 4 per GPU (at least 2),
    host memory 1.5x the weights (at least 8 GB).
    """
    req = dict(cfg.get("resources") or {})
    timeout = int(720 if _auto(req.get("timeout_min")) else req["timeout_min"])
    on_gpu = cfg.get("scale") == "paper" and str(cfg.get("device", "auto")) != "cpu"
    if not on_gpu:  # mini scale: the embedded CPU models, whatever their size
        return Resources(gpus=0 if _auto(req.get("gpus")) else int(req["gpus"]),
                         cpus=1 if _auto(req.get("cpus")) else int(req["cpus"]),
                         mem_gb=4 if _auto(req.get("mem_gb")) else int(req["mem_gb"]),
                         timeout_min=timeout)
    gpus, cpus, mem = req.get("gpus"), req.get("cpus"), req.get("mem_gb")
    if _auto(gpus) or _auto(mem):
        dtype = str(cfg.get("dtype") or "float32")
        if dtype not in BYTES_PER_PARAM:
            raise ConfigError(f"dtype={dtype!r} has no known size per parameter; use one of "
                              f"{sorted(BYTES_PER_PARAM)} or set resources.gpus and "
                              f"resources.mem_gb.")
        weights_gb = model_size_b(cfg.get("model") or {}) * BYTES_PER_PARAM[dtype]
        gpu_mem = float(req.get("gpu_mem_gb") or 80)
        if _auto(gpus):
            gpus = max(1, math.ceil(weights_gb * GPU_OVERHEAD / gpu_mem))
        if _auto(mem):
            mem = max(8, math.ceil(weights_gb * HOST_OVERHEAD))
    if _auto(cpus):
        cpus = max(2, 4 * int(gpus))
    return Resources(gpus=int(gpus), cpus=int(cpus), mem_gb=int(mem), timeout_min=timeout)


def group_by_resources(requests: list[Resources]) -> dict[Resources, list[int]]:
    """Cell indices per distinct request, in first-seen order (one job array each)."""
    groups: dict[Resources, list[int]] = {}
    for i, req in enumerate(requests):
        groups.setdefault(req, []).append(i)
    return groups


def sweep_group(experiment: str, sweep_dir: str | None, explicit: str | None) -> str:
    """The W&B group of a run: explicit `wandb.group`, else one group per sweep (the sweep
    folder's name, a timestamp), else the experiment name for a single run."""
    if explicit:
        return explicit
    if sweep_dir:
        leaf = str(sweep_dir).rstrip("/").rsplit("/", 1)[-1]
        return f"{experiment}/sweep-{leaf}"
    return experiment
