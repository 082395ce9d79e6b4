"""The life of one run: identity, skip-if-finished, pipeline call, results, W&B."""
from __future__ import annotations

import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from . import faults, runlock, shards
from . import lock as locks
from .cluster import sweep_group
from .codeversion import CODE_FILE, announce_reuse, mixed
from .data.hub import split_source_of
from .dtypes import row_dtype
from .errors import ConfigError, RagreproError
from .io import not_writable_error
from .metadata import git_state, machine, package_versions
from .models.lm import device_type
from .paths import results_dir
from .pipeline import Result, build_pipeline, pipeline_callable, pipeline_target
from .plan import check_fits
from .retrieval.faiss_index import config_label
from .run_files import read_metrics
from .tracking import Run, run_id_of
from .wandb_logger import WandbMirror

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
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
        source = split_source_of(cfg.dataset)  # from the dataset's split policy (its YAML)
        if source:
            out["split_source"] = source
    faiss = OmegaConf.select(cfg, "retriever.faiss", default=None)
    if faiss is not None:  # a dense retriever's FAISS index (auto as configured; docs/retrieval.md)
        out["faiss_index"] = config_label(OmegaConf.to_container(faiss, resolve=True))
    return out


def device_of(cfg: Any) -> str:
    """The device type this machine gives the run's model (cpu, cuda): `auto` resolved."""
    model = cfg.get("model") if hasattr(cfg, "get") else None
    device = model.get("device") if isinstance(model, (dict, DictConfig)) else None
    return device_type(str(device or cfg.get("device") or "auto"))


def provenance_settings(resolved: dict[str, Any], pins: list[locks.Pin],
                        device: str) -> dict[str, Any]:
    """What every row says about what was loaded and where: the resolved ids of the model,
    dataset and index (what the loaders reported, else the local caches), the device type
    and the attention kernel of the run's model."""
    done = locks.loaded()
    pins = [locks.Pin(p.kind, p.name, p.requested,
                      (done.get(p.entry) or {}).get("resolved") or p.resolved, p.keys)
            for p in pins]
    out = locks.row_fields(pins)
    model = resolved.get("model") if isinstance(resolved.get("model"), dict) else {}
    main = next((done[p.entry] for p in pins if "model.source" in p.keys and p.entry in done),
                None)
    out["device"] = (main or {}).get("device") or device
    out["attn_implementation"] = (main or {}).get("attn_implementation") \
        or model.get("attn_implementation")
    return out


def announce_device_reuse(run_name: str, settings: dict[str, Any], device: str) -> bool:
    """Log when a finished run being reused was computed on another device type (its id does
    not hold the resolved device: docs/running.md); True if it was."""
    recorded = settings.get("device")
    if recorded == device or (recorded is None and device == "cpu"):
        return False
    log.warning("Reusing finished run %s computed on %s; this machine runs it on %s. Its "
                "numbers stay those of %s; set overwrite=true to recompute it here, or give "
                "device=%s explicitly to keep both runs.", run_name,
                recorded or "an unrecorded device (a run from before devices were recorded)",
                device, recorded or "that device", device)
    return True


def run_for(resolved: dict[str, Any]) -> Run:
    """The run (folders, CSV) a resolved config writes to; launchers use it to skip
    finished cells before submitting them."""
    experiment = str(resolved.get("name") or "default")
    return Run(experiment, run_id_of(resolved), Path(resolved.get("results_dir") or results_dir()))


def _sweep_dir() -> str | None:
    """The multirun folder when this run is one cell of a sweep (any launcher)."""
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
    # The id hashes `device` as configured (auto stays auto, so ids of finished runs stay
    # valid); the resolved type goes into the row and a reuse across types is announced.
    device = device_of(resolved)
    run = run_for(resolved)
    code = git_state()
    rehearsing = bool(OmegaConf.select(cfg, "rehearsal.enabled", default=False))
    lock = None if rehearsing else locks.find_lock(cfg.get("lock_file", None))
    allow = bool(cfg.get("allow_unlocked", False))
    if run.is_finished() and not cfg.get("overwrite", False):
        return _reuse_finished(run, resolved, code, device, lock, allow)
    shard = shards.cell_shard(resolved)
    if shard is not None:  # shard=i/n or shard=merge of this cell (ragrepro/shards.py)
        return _sharded(cfg, run, resolved, code, device, lock, allow, shard)
    _check_before_start(cfg, resolved, lock, allow)
    # One writer per run folder (ragrepro/runlock.py): a second copy started meanwhile (a
    # relaunched sweep, a requeued job) skips instead of overwriting the first one's files.
    with runlock.writing(run, runlock.WriterSettings.of(resolved.get("writer"))) as writer:
        if writer is None:
            return None  # a live copy is writing this run (logged); a rerun finds it finished
        if run.is_finished() and not cfg.get("overwrite", False):  # it finished meanwhile
            return _reuse_finished(run, resolved, code, device, lock, allow)
        return _compute(cfg, run, resolved, code, device, lock, allow, writer)


def _check_before_start(cfg: DictConfig, resolved: dict[str, Any], lock: Any,
                        allow: bool) -> None:
    pins = locks.pins_of(resolved)
    locks.enforce(pins, lock, allow)  # a cached revision other than the lock's: refused here
    pipeline_callable(cfg)  # a missing or unimportable target is refused before the start
    if not OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        check_fits(cfg)  # a cell that cannot fit is refused before any download


def _task_overrides() -> list[str]:
    """The cell's own overrides (what reruns one part of it), when Hydra runs it."""
    if not HydraConfig.initialized():
        return []
    return [str(o) for o in HydraConfig.get().overrides.task]


def _sharded(cfg: DictConfig, run: Run, resolved: dict[str, Any], code: dict[str, Any],
             device: str, lock: Any, allow: bool, shard: str) -> dict[str, Any] | None:
    """Part i of n of the cell (then the merge when it was the last part), or shard=merge.
    Returns the merged run's metrics, or None while parts are missing."""
    merger = shards.merger_of(pipeline_callable(cfg), pipeline_target(cfg))
    command, writer_cfg = _task_overrides(), resolved.get("writer")
    if shard == shards.MERGE:
        return shards.merge_if_complete(run, shards.parts_of_run(run), merger, writer_cfg,
                                        command, required=True)
    i, n = shards.parse_shard(shard)
    part = shards.PartRun(run.experiment, run.run_id, run.root, part=i, parts=n)
    overwrite = bool(cfg.get("overwrite", False))
    if part.is_finished() and not overwrite:
        log.info("%s is already finished: skipping it (set overwrite=true to redo it).",
                 part.label)
    else:
        _check_before_start(cfg, resolved, lock, allow)
        with runlock.writing(part.lock_run(), runlock.WriterSettings.of(writer_cfg)) as writer:
            if writer is None:
                return None  # a live copy computes this part (logged)
            if overwrite or not part.is_finished():
                _compute_part(cfg, part, resolved, code, device, lock, allow, command)
    return shards.merge_if_complete(run, n, merger, writer_cfg, command)


def _compute_part(cfg: DictConfig, part: shards.PartRun, resolved: dict[str, Any],
                  code: dict[str, Any], device: str, lock: Any, allow: bool,
                  command: list[str]) -> None:
    """Run the pipeline on the part's units and write its part.json (no row, no W&B run:
    the merged run has them)."""
    seed_everything(int(cfg.get("seed", 0)))
    part.start(overwrite=bool(cfg.get("overwrite", False)), code=code,
               allow_code_change=bool(cfg.get("allow_code_change", False)))
    log.info("Run %s -> %s", part.label, part.folder)
    started = time.time()
    with locks.active(lock, allow):
        with part.timed("build"):
            pipeline = build_pipeline(cfg)
        result: Result = pipeline(run=part)
    pins = locks.pins_of(resolved)
    locks.refuse_moved(pins, lock, allow)
    settings = {**base_settings(cfg), **provenance_settings(resolved, pins, device),
                **result.settings}
    metadata = {**code, "packages": package_versions(), "machine": machine(),
                "started_at": started, "pins": {p.entry: p.resolved for p in pins},
                # no W&B run for a part (nor for the merged run); the group it would join
                "wandb_mode": "disabled", "wandb_url": None,
                "wandb_group": sweep_group(part.experiment, _sweep_dir(),
                                           (resolved.get("wandb") or {}).get("group")),
                **result.extra}
    shards.write_part(part, target=pipeline_target(cfg), config=resolved,
                      metrics=result.metrics, settings=settings, metadata=metadata,
                      command=command)


def _compute(cfg: DictConfig, run: Run, resolved: dict[str, Any], code: dict[str, Any],
             device: str, lock: Any, allow: bool,
             writer: runlock.WriterLock) -> dict[str, Any]:
    """Start (or resume) the working folder, run the pipeline and commit, holding `writer`."""
    experiment = run.experiment
    seed_everything(int(cfg.get("seed", 0)))
    fresh = not run.work_dir.exists()
    run.start(overwrite=bool(cfg.get("overwrite", False)), code=code,
              allow_code_change=bool(cfg.get("allow_code_change", False)))
    log.info("Run %s/%s -> %s", experiment, run.run_id, run.work_dir)
    wandb_cfg = dict(resolved.get("wandb") or {})
    wandb_cfg["group"] = sweep_group(experiment, _sweep_dir(), wandb_cfg.get("group"))
    mirror = WandbMirror(wandb_cfg, experiment,
                         str(cfg.get("method") or "run"), run.run_id, run.work_dir)
    failed, refused = True, False
    try:
        mirror.log_config(resolved)
        started = time.time()
        with locks.active(lock, allow):  # loaders refuse an id that moved while running
            with run.timed("build"):
                pipeline = build_pipeline(cfg)
            result: Result = pipeline(run=run)
        pins = locks.pins_of(resolved)  # again: the run may have downloaded what it loads
        locks.refuse_moved(pins, lock, allow)  # e.g. an encoder, which no loader checks
        settings = {**base_settings(cfg), **provenance_settings(resolved, pins, device),
                    **result.settings}
        metadata = {**code, "code_versions_mixed": mixed(run.code_versions),
                    "packages": package_versions(), "machine": machine(),
                    "started_at": started, **_wandb_metadata(mirror, wandb_cfg),
                    "pins": {p.entry: p.resolved for p in pins},
                    **result.extra}
        run.write_results(resolved, result.metrics, settings, metadata)
        _mirror_safely(mirror, result.metrics, settings, run)
        faults.before_commit()
        writer.check_held()  # a copy that took the run over commits it, not this one
        run.commit()
        failed = False
        log.info("Finished %s/%s: %s", experiment, run.run_id, _fmt(result.metrics))
        return result.metrics
    except RagreproError:
        refused = fresh  # e.g. a text too short: the folder this start made goes again
        raise
    except PermissionError as e:  # a write outside ragrepro.io's own (which name the file)
        if e.filename and Path(str(e.filename)).is_relative_to(run.root):
            raise not_writable_error(Path(str(e.filename)), e) from e
        raise
    finally:
        mirror.finish(failed=failed)
        if refused:
            _discard_unstarted(run)


def _discard_unstarted(run: Run) -> None:
    """Remove a working folder that a refused run created and wrote nothing into but its code
    version (and the W&B mirror's files): no `tmp_*` is left for a run that never started."""
    folder = run.work_dir
    if folder.is_dir() and all(p.name in (CODE_FILE, "wandb") for p in folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)


def _reuse_finished(run: Run, resolved: dict[str, Any], code: dict[str, Any], device: str,
                    lock: Any, allow: bool) -> dict[str, Any]:
    """A finished run's metrics, announced (other code, another device type) and checked
    against the lock file when one is in force."""
    name = f"{run.experiment}/{run.run_id}"
    log.info("Run %s is already finished: skipping (set overwrite=true to redo). Results: %s",
             name, run.final_dir)
    finished = read_metrics(run.final_dir / "metrics.json")  # damage: DataError, exit 2
    announce_reuse(name, finished.get("metadata") or {}, code)
    done = finished.get("settings") or {}
    announce_device_reuse(name, done, device)
    if lock is not None:
        locks.enforce(locks.recorded_pins(done, locks.pins_of(resolved)), lock, allow)
    return finished["metrics"]


def _wandb_metadata(mirror: WandbMirror, wandb_cfg: dict[str, Any]) -> dict[str, Any]:
    return {"wandb_mode": mirror.mode, "wandb_url": mirror.url,
            "wandb_group": wandb_cfg["group"]}


def _enter_rehearsal(cfg: DictConfig) -> None:
    """Call the rehearsal's hook (`rehearsal.setup`, named by conf/rehearsal/cpu.yaml): it
    installs its source resolver and points `cfg` at its fixtures and results/rehearsal/
    (docs/rehearsal.md). Named by the config, so the runner never imports the rehearsal."""
    target = OmegaConf.select(cfg, "rehearsal.setup", default=None)
    if not target:
        raise ConfigError("rehearsal.enabled=true but rehearsal.setup is empty: choose the "
                          "config group `rehearsal=cpu` (it names ragrepro.rehearsal.enter).")
    try:
        setup = get_object(str(target))
    except Exception as e:
        raise ConfigError(f"rehearsal.setup `{target}` cannot be imported ({e}); it names a "
                          f"function (cfg, results_dir), e.g. ragrepro.rehearsal.enter.") from e
    setup(cfg, results_dir())


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
