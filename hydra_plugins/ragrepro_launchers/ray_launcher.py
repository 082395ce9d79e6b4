"""`hydra/launcher=ray`: hydra-ray-launcher's local/existing-cluster launcher, with each
cell's CPU/GPU request taken from its experiment config and finished cells not submitted.
A failed cell does not stop the others: all are awaited, then the failures are reported."""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, setup_globals
from omegaconf import OmegaConf

from ._common import Cell, RaiseUserErrors, collect, log_plan, plan_cells

try:  # `make setup-cluster`; without it this module defines no launcher (Hydra scans it)
    from hydra_plugins.hydra_ray_launcher.ray_launcher import RayLauncher
except ImportError:  # pragma: no cover - depends on the installed extras
    RayLauncher = None

log = logging.getLogger(__name__)


def remote_options(base: dict[str, Any], cell: Cell,
                   env: dict[str, str] | None = None) -> dict[str, Any]:
    """ray.remote options of one cell: the launcher's, with `auto` CPU/GPU counts filled
    from the cell's resources, and the driver's forwarded environment variables."""
    opts = dict(base)
    if env:
        runtime_env = dict(opts.get("runtime_env") or {})
        runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
        opts["runtime_env"] = runtime_env
    if opts.get("num_cpus") in (None, "auto"):
        opts["num_cpus"] = cell.resources.cpus
    if opts.get("num_gpus") in (None, "auto"):
        opts["num_gpus"] = cell.resources.gpus
    return opts


# ray.init rejects these when it joins a running cluster instead of starting one.
LOCAL_ONLY = ("num_cpus", "num_gpus", "object_store_memory", "include_dashboard", "resources")


def init_options(init: dict[str, Any]) -> dict[str, Any]:
    """ray.init arguments: unset ones dropped, local-start ones dropped when joining."""
    opts = {k: v for k, v in init.items() if v is not None}
    if opts.get("address"):
        opts = {k: v for k, v in opts.items() if k not in LOCAL_ONLY}
    return opts


# Ray workers are started by the raylet with the environment of `ray start`, not the
# driver's: without these a worker would write results where its node's defaults point.
FORWARDED_PREFIXES = ("RAGREPRO_", "WANDB_", "HF_")
FORWARDED_NAMES = ("TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "RALM_TEST_THREADS")
_NEVER = ("WANDB_API_KEY", "HF_TOKEN")  # credentials stay on the driver's machine


def forwarded_env(environ: dict[str, str]) -> dict[str, str]:
    """The driver's variables that decide where results/caches go and how runs log."""
    return {k: v for k, v in environ.items()
            if (k.startswith(FORWARDED_PREFIXES) or k in FORWARDED_NAMES) and k not in _NEVER}


if RayLauncher is not None:
    class RagreproRayLauncher(RayLauncher):
        def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
            super().setup(hydra_context=hydra_context, config=config,
                          task_function=RaiseUserErrors(task_function))

        def launch(self, job_overrides: Sequence[Sequence[str]],
                   initial_job_idx: int) -> Sequence[JobReturn]:
            return launch_cells(self, job_overrides, initial_job_idx)


def launch_cells(launcher: Any, job_overrides: Sequence[Sequence[str]],
                 initial_job_idx: int) -> Sequence[JobReturn]:
    """Plan the cells, submit the unfinished ones as Ray tasks, await every one of them."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray, start_ray

    setup_globals()
    assert launcher.config is not None and launcher.hydra_context is not None
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    cells = plan_cells(launcher.hydra_context, launcher.config, job_overrides, initial_job_idx)
    log_plan(cells, "Ray")
    init = OmegaConf.to_container(launcher.ray_cfg.init, resolve=True)
    base = OmegaConf.to_container(launcher.ray_cfg.remote, resolve=True) or {}
    assert isinstance(init, dict) and isinstance(base, dict)
    env = forwarded_env(dict(os.environ))
    refs = {}
    if any(not c.finished for c in cells):
        start_ray(OmegaConf.create(init_options(init)))
    for cell in cells:
        if not cell.finished:
            refs[cell.idx] = launch_job_on_ray(
                launcher.hydra_context, OmegaConf.create(remote_options(base, cell, env)),
                cell.sweep_config, launcher.task_function, Singleton.get_state())
    return _collect(cells, refs)


def _collect(cells: list[Cell], refs: dict[int, Any]) -> list[JobReturn]:
    import ray

    return collect(cells, lambda cell: ray.get(refs[cell.idx]))
