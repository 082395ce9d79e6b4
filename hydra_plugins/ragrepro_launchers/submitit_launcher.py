"""`hydra/launcher=slurm` (and `submitit_cells_local`): hydra-submitit-launcher, with one job
array per distinct resource request (a 66B cell asks for more GPUs than a 125M cell) and
cells whose run already finished not submitted (resubmission after a preemption)."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

from ragrepro.cluster import Resources, group_by_resources

from ._common import Cell, RaiseUserErrors, collect, log_plan, plan_cells

try:  # `make setup-cluster`; without it this module defines no launcher (Hydra scans it)
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
        LocalLauncher,
        SlurmLauncher,
    )
except ImportError:  # pragma: no cover - depends on the installed extras
    SlurmLauncher = LocalLauncher = None

log = logging.getLogger(__name__)

# The launcher config wins where the user set a value; `null` takes the cell's own request.
RESOURCE_KEYS = {"gpus_per_node": "gpus", "cpus_per_task": "cpus", "mem_gb": "mem_gb",
                 "timeout_min": "timeout_min"}


def executor_params(params: dict[str, Any], res: Resources, executor: str) -> dict[str, Any]:
    """submitit `update_parameters` arguments for one job array: the launcher's settings
    with unset resource keys filled from the cells' request, cluster-specific keys
    prefixed as submitit wants (`slurm_partition`, ...)."""
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in ("submitit_folder", "max_num_timeout", "_target_"):
            continue
        if key in RESOURCE_KEYS and value in (None, 0) and not (key == "gpus_per_node"
                                                                and value == 0):
            value = getattr(res, RESOURCE_KEYS[key])
        if value is None:
            continue
        out[key if key in base else f"{executor}_{key}"] = value
    if executor == "local":  # the local executor knows no memory/partition settings
        out = {k: v for k, v in out.items() if not k.startswith("local_") and k != "mem_gb"}
    return out


def launch_cells(launcher: Any, job_overrides: Sequence[Sequence[str]],
                 initial_job_idx: int) -> Sequence[JobReturn]:
    import submitit

    from ._slurm_watch import install_if_needed

    assert launcher.config is not None and launcher.hydra_context is not None
    if launcher._EXECUTOR == "slurm" and install_if_needed():
        log.info("This Slurm keeps no accounting (no sacct): job states come from scontrol.")
    Path(str(launcher.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    cells = plan_cells(launcher.hydra_context, launcher.config, job_overrides, initial_job_idx)
    log_plan(cells, f"submitit/{launcher._EXECUTOR}")
    todo = [c for c in cells if not c.finished]
    jobs: dict[int, Any] = {}
    for res, members in group_by_resources([c.resources for c in todo]).items():
        group = [todo[i] for i in members]
        init = {"folder": launcher.params["submitit_folder"]}
        if launcher.params.get("max_num_timeout") is not None:
            init[f"{launcher._EXECUTOR}_max_num_timeout"] = launcher.params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=launcher._EXECUTOR, **init)
        executor.update_parameters(**executor_params(launcher.params, res, launcher._EXECUTOR))
        args = [(c.overrides, "hydra.sweep.dir", c.idx, f"job_id_for_{c.idx}",
                 Singleton.get_state()) for c in group]
        submitted = executor.map_array(launcher, *zip(*args))
        log.info("Submitted %d cells as one array (%s): job ids %s", len(group), res,
                 ", ".join(j.job_id for j in submitted))
        jobs.update({c.idx: j for c, j in zip(group, submitted)})
    return _collect(cells, jobs)


def _collect(cells: list[Cell], jobs: dict[int, Any]) -> list[JobReturn]:
    return collect(cells, lambda cell: jobs[cell.idx].results()[0])


class _CellMixin:
    """Runs on the node: a failed cell fails its Slurm job (exit code, FAILED state) instead
    of returning a failed result inside a job Slurm reports as COMPLETED."""

    def setup(self, *, hydra_context: Any, task_function: Any, config: Any) -> None:
        super().setup(hydra_context=hydra_context, config=config,  # type: ignore[misc]
                      task_function=RaiseUserErrors(task_function))

    def __call__(self, *args: Any, **kwargs: Any) -> JobReturn:
        ret = super().__call__(*args, **kwargs)  # type: ignore[misc]
        if ret.status == JobStatus.FAILED:
            raise ret._return_value
        return ret

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        return launch_cells(self, job_overrides, initial_job_idx)


if SlurmLauncher is not None:
    class RagreproSlurmLauncher(_CellMixin, SlurmLauncher):
        pass

    class RagreproLocalLauncher(_CellMixin, LocalLauncher):
        pass
