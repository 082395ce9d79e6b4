"""What the Slurm and Ray launchers share: per-cell config, resources, skip-if-finished."""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from ragrepro.cluster import Resources, resources_for

log = logging.getLogger(__name__)


@dataclass
class Cell:
    """One job of a sweep, as the launcher sees it before submitting it."""

    idx: int
    overrides: list[str]
    sweep_config: DictConfig
    resources: Resources
    finished: bool


def _task_config(sweep_config: DictConfig) -> dict[str, Any]:
    """The config the task function will get (no `hydra` node), resolved."""
    HydraConfig.instance().set_config(sweep_config)  # for ${hydra:...} interpolations
    task_cfg = copy.deepcopy(sweep_config)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]  # as hydra's run_job does before calling the task
    cfg = OmegaConf.to_container(task_cfg, resolve=True)
    assert isinstance(cfg, dict)
    return cfg


def plan_cells(hydra_context: HydraContext, config: DictConfig,
               job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Cell]:
    """Load each cell's config, its resource request and whether its run already finished."""
    from ragrepro.runner import run_for

    cells = []
    for offset, overrides in enumerate(job_overrides):
        idx = initial_job_idx + offset
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.num = idx
        task_cfg = _task_config(sweep_config)
        finished = run_for(task_cfg).is_finished() and not task_cfg.get("overwrite", False)
        cells.append(Cell(idx, list(overrides), sweep_config, resources_for(task_cfg), finished))
    HydraConfig.instance().set_config(config)
    return cells


def log_plan(cells: list[Cell], engine: str) -> None:
    todo = [c for c in cells if not c.finished]
    log.info("%s: %d cells, %d already finished (skipped), %d to run", engine, len(cells),
             len(cells) - len(todo), len(todo))
    for c in cells:
        state = "finished, skipped" if c.finished else (
            f"gpus={c.resources.gpus} cpus={c.resources.cpus} mem={c.resources.mem_gb}G")
        log.info("\t#%d : %s [%s]", c.idx, " ".join(filter_overrides(c.overrides)), state)


def skipped_return(cell: Cell) -> JobReturn:
    """What Hydra's sweeper expects back for a cell that was not submitted."""
    ret = JobReturn(overrides=cell.overrides, cfg=cell.sweep_config,
                    hydra_cfg=cell.sweep_config, task_name="skipped")
    ret.status = JobStatus.COMPLETED
    ret.return_value = None
    return ret


def failed_cells_error(failures: list[tuple[Cell, BaseException]]) -> RuntimeError:
    lines = [f"  #{c.idx} {' '.join(filter_overrides(c.overrides))}: "
             f"{type(e).__name__}: {str(e).strip()[-1500:]}" for c, e in failures]
    return RuntimeError(f"{len(failures)} sweep cell(s) failed:\n" + "\n".join(lines) +
                        "\nFinished cells are kept; rerun the same command to run only the "
                        "unfinished ones.")


class CellError(RuntimeError):
    """A cell stopped with an error the user can act on (the message names the fix)."""


class RaiseUserErrors:
    """Wraps the task function for remote cells: the command line turns a user error into
    `SystemExit(2)` after logging it, which a Slurm/Ray worker would report as a bare exit
    (or, without `sacct`, never report). Here it becomes an exception that travels back to
    the launcher with its message."""

    def __init__(self, task_function: Any):
        self.task_function = task_function

    def __call__(self, cfg: DictConfig) -> Any:
        try:
            return self.task_function(cfg)
        except SystemExit as e:
            cause = e.__context__  # `raise SystemExit(2) from None` keeps it here
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else "no message"
            raise CellError(f"exit code {e.code}: {detail}") from None


def collect(cells: list[Cell], wait: Callable[[Cell], JobReturn]) -> list[JobReturn]:
    """Wait for every submitted cell (`wait` returns its JobReturn) so that one failure does not
    abandon the others mid-run; all failures are reported together, with their errors."""
    returns, failures = [], []
    for cell in cells:
        if cell.finished:
            returns.append(skipped_return(cell))
            continue
        try:
            ret = wait(cell)
            _ = ret.return_value  # raises the cell's own exception if it failed
            returns.append(ret)
        except Exception as e:  # noqa: BLE001 - every failure is reported together
            failures.append((cell, e))
    if failures:
        raise failed_cells_error(failures)
    return returns
