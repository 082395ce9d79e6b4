"""The life of one run: identity, skip-if-finished, pipeline call, results, W&B."""
from __future__ import annotations

import logging
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from .cluster import sweep_group
from .codeversion import announce_reuse, mixed
from .metadata import git_state, machine, package_versions
from .paths import results_dir
from .pipeline import Result, build_pipeline, pipeline_callable
from .tracking import Run, run_id_of
from .wandb_logger import WandbMirror

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def base_settings(cfg: DictConfig) -> dict[str, Any]:
    """Settings every row carries; pipelines add their own."""
    out: dict[str, Any] = {"method": cfg.get("method"), "scale": cfg.get("scale"),
                           "seed": cfg.get("seed"), "limit": cfg.get("limit"),
                           "dtype": row_dtype(cfg)}
    if "model" in cfg and cfg.model is not None:
        out["model"] = cfg.model.get("name")
        out["model_revision"] = cfg.model.get("revision")
    if "dataset" in cfg and cfg.dataset is not None:
        out["dataset"] = cfg.dataset.get("name")
        out["dataset_variant"] = cfg.dataset.get("variant")
        out["split"] = cfg.dataset.get("split")
        from .data.hub import split_source_of

        source = split_source_of(cfg.dataset)  # from the dataset's split policy (its YAML)
        if source:
            out["split_source"] = source
    faiss = OmegaConf.select(cfg, "retriever.faiss", default=None)
    if faiss is not None:  # a dense retriever's FAISS index (auto as configured; docs/retrieval.md)
        from .retrieval.faiss_index import config_label

        out["faiss_index"] = config_label(OmegaConf.to_container(faiss, resolve=True))
    return out


def row_dtype(cfg: DictConfig) -> str | None:
    """The dtype the model actually loads in (dtype=checkpoint resolved), for every row."""
    dtype = cfg.get("dtype")
    if dtype == "checkpoint":
        return OmegaConf.select(cfg, "model.checkpoint_dtype", default=None) or dtype
    return dtype


def run_for(resolved: dict[str, Any]) -> Run:
    """The run (folders, CSV) a resolved config writes to; launchers use it to skip
    finished cells before submitting them."""
    experiment = str(resolved.get("name") or "default")
    return Run(experiment, run_id_of(resolved), Path(resolved.get("results_dir") or results_dir()))


def _sweep_dir() -> str | None:
    """The multirun folder when this run is one cell of a sweep (any launcher)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():
        return None
    hydra_cfg = HydraConfig.get()
    return str(hydra_cfg.sweep.dir) if hydra_cfg.mode == RunMode.MULTIRUN else None


def execute(cfg: DictConfig) -> dict[str, Any] | None:
    """Run the experiment described by cfg; returns its metrics (or the finished ones)."""
    if OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        _enter_rehearsal(cfg)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(resolved, dict)
    run = run_for(resolved)
    experiment = run.experiment
    code = git_state()
    if run.is_finished() and not cfg.get("overwrite", False):
        log.info("Run %s/%s is already finished: skipping (set overwrite=true to redo). "
                 "Results: %s", experiment, run.run_id, run.final_dir)
        import json

        finished = json.loads((run.final_dir / "metrics.json").read_text())
        announce_reuse(f"{experiment}/{run.run_id}", finished.get("metadata") or {}, code)
        return finished["metrics"]
    pipeline_callable(cfg)  # a missing or unimportable target is refused before the start
    if not OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        from .plan import check_fits

        check_fits(cfg)  # a cell that cannot fit is refused before any download
    seed_everything(int(cfg.get("seed", 0)))
    run.start(overwrite=bool(cfg.get("overwrite", False)), code=code,
              allow_code_change=bool(cfg.get("allow_code_change", False)))
    log.info("Run %s/%s -> %s", experiment, run.run_id, run.work_dir)
    wandb_cfg = dict(resolved.get("wandb") or {})
    wandb_cfg["group"] = sweep_group(experiment, _sweep_dir(), wandb_cfg.get("group"))
    mirror = WandbMirror(wandb_cfg, experiment,
                         str(cfg.get("method") or "run"), run.run_id, run.work_dir)
    failed = True
    try:
        mirror.log_config(resolved)
        started = time.time()
        with run.timed("build"):
            pipeline = build_pipeline(cfg)
        result: Result = pipeline(run=run)
        settings = {**base_settings(cfg), **result.settings}
        metadata = {**code, "code_versions_mixed": mixed(run.code_versions),
                    "packages": package_versions(), "machine": machine(),
                    "started_at": started, "wandb_mode": mirror.mode, "wandb_url": mirror.url,
                    "wandb_group": wandb_cfg["group"],
                    **result.extra}
        run.write_results(resolved, result.metrics, settings, metadata)
        _mirror_safely(mirror, result.metrics, settings, run)
        run.commit()
        failed = False
        log.info("Finished %s/%s: %s", experiment, run.run_id, _fmt(result.metrics))
        return result.metrics
    finally:
        mirror.finish(failed=failed)


def _enter_rehearsal(cfg: DictConfig) -> None:
    """Stand-ins, fixtures and results/rehearsal/ (docs/rehearsal.md); locations only."""
    from . import rehearsal
    from .rehearsal.config import apply

    given = OmegaConf.select(cfg, "rehearsal.fixtures", default=None)
    root = Path(str(given)) if given else rehearsal.ensure_fixtures()
    rehearsal.activate(root)
    apply(cfg, root, results_dir())


def _mirror_safely(mirror: WandbMirror, metrics: dict[str, Any], settings: dict[str, Any],
                   run: Run) -> None:
    """W&B mirrors the results; its failure must never cost the results on disk."""
    try:
        mirror.log_results(metrics, settings, run.samples_path, run.work_dir)
        mirror.finish(failed=False)
    except Exception as e:  # noqa: BLE001 - any W&B failure is reported, then ignored
        log.warning("W&B logging failed (%s: %s); results are on disk and in the CSV.",
                    type(e).__name__, e)


def _fmt(metrics: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in metrics.items() if not isinstance(v, (dict, list)))
