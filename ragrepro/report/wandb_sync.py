"""Runs mirrored to W&B only offline, and the `wandb sync` command that uploads them."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runs import RunRecord
from .tables import BuiltTable


@dataclass
class OfflineRun:
    experiment: str
    run_id: str
    run_dirs: list[Path] = field(default_factory=list)   # <run folder>/wandb/offline-run-*


def offline_runs(runs: list[RunRecord]) -> list[OfflineRun]:
    """Runs whose metadata says wandb_mode == offline, with their offline run folders."""
    out = []
    for r in runs:
        if str(r.metadata.get("wandb_mode") or "") != "offline":
            continue
        dirs = sorted((r.dir / "wandb").glob("offline-run-*")) if r.dir else []
        out.append(OfflineRun(r.experiment, r.run_id, dirs))
    return out


def sync_command(offline: list[OfflineRun]) -> str | None:
    """One `wandb sync` over every offline folder, or None when there is nothing to sync."""
    paths = [p for o in offline for p in o.run_dirs]
    if not paths:
        return None
    return "wandb sync " + " ".join(shlex.quote(str(p)) for p in paths)


TABLE_COLUMNS = ("cell", "status", "ours", "paper", "diff", "ours_gain", "paper_gain", "metric",
                 "paper_metric", "note", "experiment", "run_id")


def table_rows(built: BuiltTable) -> tuple[list[str], list[list[Any]]]:
    """A report table as W&B Table columns and rows (numbers stay numbers)."""
    columns = [*TABLE_COLUMNS, *built.show]
    data = [[getattr(r, c) for c in TABLE_COLUMNS] + [r.settings.get(c) for c in built.show]
            for r in built.rows]
    return columns, [[None if v is None else (v if isinstance(v, (int, float)) else str(v))
                      for v in row] for row in data]


def log_tables(tables: list[BuiltTable], mode: str, out_dir: Path,
               project: str = "ragrepro", entity: str | None = None) -> str | None:
    """Log every report table as a wandb.Table to one run (group and job type `report`);
    returns the run URL (None offline)."""
    import wandb

    out_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(project=project, entity=entity, mode=mode, group="report",
                     job_type="report", name="report", dir=str(out_dir),
                     reinit="finish_previous")
    try:
        for t in tables:
            columns, data = table_rows(t)
            run.log({f"report/{t.name}": wandb.Table(columns=columns, data=data)})
        return getattr(run, "url", None)
    finally:
        run.finish()
