"""Run identity, result folders, the per-experiment CSV, and the W&B mirror.

The CSV and JSON on disk are the source of truth; W&B only mirrors them.
A run writes into `results/<experiment>/tmp_<run-id>/` and that folder is renamed to
`<run-id>/` only when the run finished, so a finished folder is always complete and a
killed run leaves its checkpoints where the rerun finds them.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import faults
from .codeversion import check_resume
from .hashing import hash_obj
from .io import (
    append_line,
    atomic_write_json,
    atomic_write_text,
    disk_full_error,
    locked,
    read_jsonl_tolerant,
)

log = logging.getLogger(__name__)

# Keys that never change a number: excluded from the run id.
COSMETIC_KEYS = frozenset({"wandb", "overwrite", "results_dir", "log_level", "progress",
                           "fault", "hydra", "notes", "tags", "allow_code_change",
                           "resources", "lock_file", "allow_unlocked"})
# Keys added after results were committed, at the value that reproduces what ran before
# them: left out of the hash at that value (at any depth), so existing run ids stay valid.
# `attn_implementation: null` is transformers' own choice, which every earlier run used.
ID_NEUTRAL = {"attn_implementation": None}
# Credential-like key names only: a bare "token" substring would also hide settings such as
# doc_max_tokens or rerank_tokens, and configs could no longer be compared.
_SECRET = re.compile(r"(api_?key|(^|[_-])token$|secret|password)", re.IGNORECASE)


def scrub_secrets(obj: Any) -> Any:
    """Drop any value whose key looks like a credential, recursively."""
    if isinstance(obj, dict):
        return {k: ("<redacted>" if _SECRET.search(str(k)) and v else scrub_secrets(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub_secrets(v) for v in obj]
    return obj


def run_id_of(resolved_cfg: dict[str, Any]) -> str:
    """Hash of the resolved config without cosmetic keys: same settings, same id.

    The pipeline node counts by its `_target_` only: its other arguments interpolate nodes
    (model, dataset, settings) that are hashed where they live (ragrepro.pipeline)."""
    kept = {k: v for k, v in resolved_cfg.items() if k not in COSMETIC_KEYS}
    if isinstance(kept.get("pipeline"), dict):
        kept["pipeline"] = {"_target_": kept["pipeline"].get("_target_")}
    return hash_obj(_without_neutral(kept))


def _without_neutral(obj: Any) -> Any:
    """obj without the ID_NEUTRAL keys that hold their neutral value, recursively."""
    if isinstance(obj, dict):
        return {k: _without_neutral(v) for k, v in obj.items()
                if not (k in ID_NEUTRAL and v == ID_NEUTRAL[k])}
    if isinstance(obj, list):
        return [_without_neutral(v) for v in obj]
    return obj


@dataclass
class Run:
    """One run's folders and incremental outputs."""

    experiment: str
    run_id: str
    root: Path
    timings: dict[str, float] = field(default_factory=dict)
    code_versions: list[dict[str, Any]] = field(default_factory=list)
    _row: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def final_dir(self) -> Path:
        return self.root / self.experiment / self.run_id

    @property
    def work_dir(self) -> Path:
        return self.root / self.experiment / f"tmp_{self.run_id}"

    @property
    def csv_path(self) -> Path:
        return self.root / f"{self.experiment}.csv"

    @property
    def samples_path(self) -> Path:
        return self.work_dir / "samples.jsonl"

    def is_finished(self) -> bool:
        return (self.final_dir / "metrics.json").exists()

    def start(self, overwrite: bool = False, code: dict[str, Any] | None = None,
              allow_code_change: bool = False) -> None:
        """Create (or reopen) the working folder. With `code` (this process's version, see
        ragrepro.codeversion), records left by other code are refused unless allowed."""
        if overwrite and self.final_dir.exists():
            shutil.rmtree(self.final_dir)
        if overwrite and self.work_dir.exists():
            shutil.rmtree(self.work_dir)
        if code is not None:
            self.code_versions = check_resume(self.work_dir, code, allow_code_change)
        self.work_dir.mkdir(parents=True, exist_ok=True)

    def path(self, name: str) -> Path:
        """A file inside the run's working folder (moved with it when the run finishes)."""
        return self.work_dir / name

    # -- incremental per-sample records (also the resume checkpoint) -------------------
    def done_samples(self) -> list[dict[str, Any]]:
        return read_jsonl_tolerant(self.samples_path)

    def add_sample(self, record: dict[str, Any]) -> None:
        try:
            faults.before_sample_write()
        except OSError as e:
            raise disk_full_error(self.samples_path, e) from e
        append_line(self.samples_path, json.dumps(record, ensure_ascii=False, default=float))
        faults.after_sample_write()

    def repair_samples(self) -> list[dict[str, Any]]:
        """Rewrite samples.jsonl without a torn last line and return its records."""
        records = self.done_samples()
        if self.samples_path.exists():
            atomic_write_text(self.samples_path, "".join(
                json.dumps(r, ensure_ascii=False, default=float) + "\n" for r in records))
        return records

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[stage] = self.timings.get(stage, 0.0) + time.perf_counter() - t0

    def write_results(self, config: dict[str, Any], metrics: dict[str, Any],
                      settings: dict[str, Any], metadata: dict[str, Any]) -> None:
        """Write config.json and metrics.json into the working folder (not yet committed)."""
        atomic_write_json(self.work_dir / "config.json", scrub_secrets(config))
        atomic_write_json(self.work_dir / "metrics.json", {
            "experiment": self.experiment, "run_id": self.run_id, "metrics": metrics,
            "settings": settings, "metadata": scrub_secrets(metadata),
            "timings_s": self.timings})
        self._row = csv_row(self, metrics, settings, metadata)

    def commit(self) -> Path:
        """Rename the working folder to its final name and append the CSV row."""
        if self.final_dir.exists():  # overwrite=true on a finished run
            shutil.rmtree(self.final_dir)
        os.replace(self.work_dir, self.final_dir)
        append_csv_row(self.csv_path, self._row)
        return self.final_dir

    def finish(self, config: dict[str, Any], metrics: dict[str, Any], settings: dict[str, Any],
               metadata: dict[str, Any]) -> Path:
        self.write_results(config, metrics, settings, metadata)
        return self.commit()


def csv_row(run: Run, metrics: dict[str, Any], settings: dict[str, Any],
            metadata: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run.run_id, "experiment": run.experiment,
                           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
    row.update({k: v for k, v in settings.items()})
    row.update({k: v for k, v in metrics.items() if not isinstance(v, (dict, list))})
    row["git_commit"] = metadata.get("git_commit")
    row["git_dirty"] = metadata.get("git_dirty")
    row["code_version"] = metadata.get("code_version")
    row["code_id"] = metadata.get("code_id")
    if metadata.get("code_versions_mixed"):
        row["code_versions_mixed"] = metadata["code_versions_mixed"]
    row["wall_s"] = round(sum(run.timings.values()), 3)
    return row


def append_csv_row(path: Path, row: dict[str, Any]) -> None:
    """Append under a file lock; a row with new columns rewrites the file with the union
    header. A rerun of the same run id replaces its earlier row instead of duplicating it."""
    with locked(path):
        rows = read_csv(path)
        rows = [r for r in rows if r.get("run_id") != str(row["run_id"])]
        rows.append({k: ("" if v is None else v) for k, v in row.items()})
        header: list[str] = []
        for r in rows:
            header += [k for k in r if k not in header]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(path, buf.getvalue())


def read_csv(path: Path) -> list[dict[str, str]]:
    if not Path(path).exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
