"""What a pipeline is, for the runner and for method packages: the public core contract.

An experiment config names its pipeline in `pipeline._target_` (e.g. `ralm.lm_eval.run`);
the runner (ragrepro.runner.execute) calls it with the composed config and the run's folder
and records the Result it returns as one CSV row.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from omegaconf import DictConfig

from .tracking import Run


@dataclass
class Result:
    """What a pipeline returns: aggregate metrics and the settings that change them."""

    metrics: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Pipeline(Protocol):
    """`pipeline(cfg=cfg, run=run) -> Result`; per-sample records go to run's files."""

    def __call__(self, cfg: DictConfig, run: Run) -> Result: ...
