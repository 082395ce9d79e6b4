"""Mirror a finished run to Weights & Biases. Never the source of truth: the CSV is."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def resolve_mode(mode: str) -> str:
    """`auto`: WANDB_MODE if set; else online with an API key (env or netrc), else offline."""
    if mode != "auto":
        return mode
    if os.environ.get("WANDB_MODE") in ("online", "offline", "disabled"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    netrc = Path.home() / ".netrc"
    if netrc.exists() and "api.wandb.ai" in netrc.read_text(errors="ignore"):
        return "online"
    return "offline"


class WandbMirror:
    """init at run start, log at the end, finish() always (called from a finally)."""

    def __init__(self, cfg: dict[str, Any], experiment: str, method: str, run_id: str,
                 run_dir: Path):
        self.run = None
        mode = resolve_mode(str(cfg.get("mode", "auto")))
        self.mode = mode
        if mode == "disabled":
            return
        try:
            import wandb  # deferred: wandb (optional, slow to import; off when disabled)
        except ImportError:
            log.warning("wandb is not installed; W&B mirroring is off (CSV is written).")
            return
        self.run = wandb.init(
            project=cfg.get("project", "ragrepro"), entity=cfg.get("entity"), mode=mode,
            group=cfg.get("group") or experiment, job_type=method, name=f"{experiment}/{run_id}",
            id=f"{experiment.replace('/', '-')}-{run_id}", resume="allow",
            tags=list(cfg.get("tags") or []), dir=str(run_dir), reinit="finish_previous")

    def log_config(self, config: dict[str, Any]) -> None:
        if self.run is not None:
            self.run.config.update(config, allow_val_change=True)

    def log_results(self, metrics: dict[str, Any], settings: dict[str, Any],
                    samples_path: Path | None, result_dir: Path) -> None:
        if self.run is None:
            return
        import wandb  # deferred: wandb (optional; installed, as __init__ found)

        flat = {k: v for k, v in metrics.items() if isinstance(v, (int, float))}
        self.run.summary.update(flat)
        row = {**settings, **flat}
        self.run.log({"results": wandb.Table(columns=list(row), data=[list(row.values())])})
        if samples_path is not None and samples_path.exists():
            self._log_samples(samples_path)
        artifact = wandb.Artifact(f"results-{self.run.id}", type="results")
        for name in ("metrics.json", "config.json"):
            if (result_dir / name).exists():
                artifact.add_file(str(result_dir / name))
        self.run.log_artifact(artifact)

    def _log_samples(self, path: Path, max_rows: int = 2000) -> None:
        import wandb  # deferred: wandb (optional; installed, as __init__ found)

        rows = [json.loads(line) for line in path.read_text().splitlines()[:max_rows] if line]
        if not rows:
            return
        cols = sorted({k for r in rows for k in r})
        data = [[json.dumps(r.get(c)) if isinstance(r.get(c), (dict, list)) else r.get(c)
                 for c in cols] for r in rows]
        self.run.log({"samples": wandb.Table(columns=cols, data=data)})

    @property
    def url(self) -> str | None:
        return getattr(self.run, "url", None) if self.run is not None else None

    def finish(self, failed: bool = False) -> None:
        if self.run is not None:
            self.run.finish(exit_code=1 if failed else 0)
            self.run = None
