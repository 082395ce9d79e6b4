"""What a pipeline is, for the runner and for method packages: the public core contract.

An experiment config names its pipeline and the components it needs; Hydra builds them:

    pipeline:
      _target_: ralm.lm_eval.run      # a function run(run, *, lm, texts, ..., settings)
      _partial_: true                 # or a class whose instances are called with the run
      lm: ${model}                    # components: interpolations of top-level config nodes
      texts: ${dataset}
      settings: ${ralm}               # a structured (typed) settings node

The runner (ragrepro.runner.execute) checks whether the run is finished, then builds the
pipeline (`build_pipeline`: every nested `_target_` is instantiated, structured settings become
their dataclasses) and calls `pipeline(run=run) -> Result`. Arguments of a pipeline node are
interpolations of nodes that are hashed on their own, so the run id hashes only the pipeline's
`_target_` (ragrepro.tracking.run_id_of).

A target written against the old contract `fn(cfg, run)` (it names a `cfg` parameter) is
refused with the fix; tests/core/test_pipeline_contract.py composes every experiment and
checks that its pipeline is typed.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol

from hydra.errors import InstantiationException
from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError, RagreproError
from .tracking import Run


@dataclass
class Result:
    """What a pipeline returns: aggregate metrics and the settings that change them."""

    metrics: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class Pipeline(Protocol):
    """`pipeline(run=run) -> Result`; per-sample records go to the run's files."""

    def __call__(self, run: Run) -> Result: ...


def pipeline_target(cfg: DictConfig) -> str:
    target = OmegaConf.select(cfg, "pipeline._target_")
    if not target:
        raise ConfigError("This config has no `pipeline._target_`: choose an experiment, e.g. "
                          "`ragrepro experiment=ralm/table1` (see `ragrepro --help`).")
    return str(target)


def is_legacy(fn: Any) -> bool:
    """A target written against the old contract `fn(cfg, run)`."""
    try:
        return "cfg" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def pipeline_callable(cfg: DictConfig) -> Any:
    """The pipeline's target, imported (a bad path is refused before the run starts)."""
    target = pipeline_target(cfg)
    try:
        return get_object(target)
    except Exception as e:
        raise ConfigError(f"pipeline._target_ `{target}` cannot be imported ({e}); check the "
                          "experiment file's `pipeline:` node.") from e


def build_pipeline(cfg: DictConfig) -> Pipeline:
    """Instantiate the pipeline node and its components (models load here)."""
    fn = pipeline_callable(cfg)
    if is_legacy(fn):
        raise ConfigError(f"pipeline._target_ `{pipeline_target(cfg)}` takes the whole config "
                          "(`cfg`): pipelines now receive their components and typed settings "
                          "as arguments (see docs/extending.md, 'Add a method').")
    try:
        return instantiate(cfg.pipeline, _convert_="object")
    except InstantiationException as e:
        if isinstance(e.__cause__, RagreproError):  # a loader's own error (a bad data file)
            raise e.__cause__ from None
        # e.g. a settings dataclass given an unknown (renamed) or missing key
        raise ConfigError(f"Building the pipeline `{pipeline_target(cfg)}` failed: {e}. Check "
                          "the keys of the experiment and its settings files against the "
                          "dataclass named in the message.") from e
