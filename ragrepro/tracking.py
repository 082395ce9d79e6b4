"""Run identity, result folders, the per-experiment CSV, and the W&B mirror.

The CSV and JSON on disk are the source of truth; W&B only mirrors them.
A run writes into `results/<experiment>/tmp_<run-id>/` and that folder is renamed to
`<run-id>/` only when the run finished, so a finished folder is always complete and a
killed run leaves its checkpoints where the rerun finds them.

Commit order (docs/reliability.md, "No run without its row"): the CSV row is written first
(replacing any row of the same run id), the rename to `<run-id>/` is the finished marker and
comes last. A kill between the two leaves an unfinished run that the rerun redoes, replacing
the row; a kill after leaves a finished run with its row. A finished folder whose row is
missing anyway (a CSV edited by hand, a row lost by older code) gets it back from its
metrics.json whenever a run or a launcher asks `is_finished()`.
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

from . import faults, usage
from .attest import samples_attestation
from .codeversion import check_resume
from .hashing import hash_obj
from .io import (
    append_line,
    atomic_write_json,
    atomic_write_text,
    disk_full_error,
    locked,
)
from .methods import id_view
from .run_files import csv_damaged, read_csv_text, read_metrics, read_records

log = logging.getLogger(__name__)

# Keys that never change a number: excluded from the run id.
COSMETIC_KEYS = frozenset({"wandb", "overwrite", "results_dir", "log_level", "progress",
                           "fault", "hydra", "notes", "tags", "allow_code_change",
                           "resources", "lock_file", "allow_unlocked", "writer",
                           "min_scored_tokens"})
# Keys added after results were committed, at the value that reproduces what ran before
# them: left out of the hash at that value (at any depth), so existing run ids stay valid.
# `attn_implementation: null` is transformers' own choice, which every earlier run used;
# `setup` is the rehearsal's hook (conf/rehearsal/cpu.yaml), which ran before it was named.
ID_NEUTRAL = {"attn_implementation": None, "setup": "ragrepro.rehearsal.enter",
              "refine": None,  # retriever.faiss.refine: null = no re-ranking, as before
              # riches.index_shard_tokens: the index is the same whatever the shard size, and
              # 2^31 - 1 (one int32 shard up to that) keeps every earlier RICHES run id
              "index_shard_tokens": 2**31 - 1}
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
    (model, dataset, settings) that are hashed where they live (ragrepro.pipeline). Each
    method profile's `id_view` is applied first (ragrepro.methods.id_view)."""
    kept = {k: v for k, v in id_view(resolved_cfg).items() if k not in COSMETIC_KEYS}
    # root `shard`: a cell's shard=i/n (or its null default) names a part of this same run
    # (ragrepro/shards.py); only a pipeline taking it as an argument (encode_shards) hashes it
    if not (isinstance(kept.get("pipeline"), dict) and "shard" in kept["pipeline"]):
        kept.pop("shard", None)
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
    def replaced_dir(self) -> Path:
        """Where a finished folder waits to be deleted when a new one replaces it; the tmp_
        prefix keeps the report's readers and the skip test away from it."""
        return self.root / self.experiment / f"tmp_{self.run_id}.replaced"

    @property
    def csv_path(self) -> Path:
        return self.root / f"{self.experiment}.csv"

    @property
    def samples_path(self) -> Path:
        return self.work_dir / "samples.jsonl"

    def is_finished(self) -> bool:
        """Whether the run finished; a finished run missing its CSV row gets it back here, so
        every skip (the runner's, a launcher's before submitting) leaves exactly one row."""
        if not (self.final_dir / "metrics.json").exists():
            return False
        _remove(self.replaced_dir)  # a kill after a commit's rename left it behind
        restore_row(self)
        return True

    def start(self, overwrite: bool = False, code: dict[str, Any] | None = None,
              allow_code_change: bool = False) -> None:
        """Create (or reopen) the working folder. With `code` (this process's version, see
        ragrepro.codeversion), records left by other code are refused unless allowed.

        overwrite=true on a finished run drops its row first, then its folder, so a kill in
        between leaves a finished run whose row `is_finished` restores, or an unfinished one."""
        if overwrite and self.final_dir.exists():
            drop_csv_row(self.csv_path, self.run_id)
            faults.in_overwrite(1)
            os.replace(self.final_dir, self._clear_replaced())
            faults.in_overwrite(2)
        _remove(self.replaced_dir)
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
        """The records so far; a torn last line is dropped, any other bad line is refused."""
        return read_records(self.samples_path, finished=False)

    def add_sample(self, record: dict[str, Any]) -> None:
        try:
            faults.before_sample_write()
        except OSError as e:
            raise disk_full_error(self.samples_path, e) from e
        append_line(self.samples_path, json.dumps(record, ensure_ascii=False, default=float))
        faults.after_sample_write(self.work_dir)

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
                      settings: dict[str, Any], metadata: dict[str, Any],
                      record: dict[str, Any] | None = None) -> None:
        """Write config.json and metrics.json into the working folder (not yet committed).

        The samples are complete here, so metadata gets their attestation (ragrepro.attest,
        from samples.jsonl as written: what any later reader of the file computes); a run
        without samples.jsonl records none. `record`: more top-level keys of metrics.json
        (a rescored run's `rescored_from` and `rescore`, ragrepro.rescore)."""
        metadata = {**metadata, "usage": usage.peak_usage()}  # peak RSS (ragrepro/usage.py)
        attested = samples_attestation(self.samples_path)
        if attested is not None:
            metadata = {**metadata, "attestation": attested}
        atomic_write_json(self.work_dir / "config.json", scrub_secrets(config))
        atomic_write_json(self.work_dir / "metrics.json", {
            "experiment": self.experiment, "run_id": self.run_id, "metrics": metrics,
            "settings": settings, "metadata": scrub_secrets(metadata),
            "timings_s": self.timings, **(record or {})})
        self._row = csv_row(self, metrics, settings, metadata)

    def commit(self) -> Path:
        """Write the CSV row, then rename the working folder to its final name: the rename
        is the finished marker, so it comes last (see the module docstring). A failed lock
        or a kill before it leaves an unfinished run whose rerun replaces the row."""
        append_csv_row(self.csv_path, self._row)
        faults.in_commit(1)
        if self.final_dir.exists():  # a twin job finished the same run id meanwhile
            os.replace(self.final_dir, self._clear_replaced())
        faults.in_commit(2)
        os.replace(self.work_dir, self.final_dir)
        faults.in_commit(3)
        _remove(self.replaced_dir)
        return self.final_dir

    def _clear_replaced(self) -> Path:
        _remove(self.replaced_dir)
        return self.replaced_dir

    def finish(self, config: dict[str, Any], metrics: dict[str, Any], settings: dict[str, Any],
               metadata: dict[str, Any]) -> Path:
        self.write_results(config, metrics, settings, metadata)
        return self.commit()


def _remove(path: Path) -> None:
    # only ever a replaced folder: a second process removing it too must not fail the run
    shutil.rmtree(path, ignore_errors=True)


# Metadata shown in the row where a run records it: the hash of its per-sample outputs
# (ragrepro.attest) and, for a rescored run, `experiment/run_id` of its source (ragrepro.rescore).
ROW_METADATA = ("attestation", "rescored_from")


def csv_row(run: Run, metrics: dict[str, Any], settings: dict[str, Any],
            metadata: dict[str, Any], finished_at: float | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run.run_id, "experiment": run.experiment,
                           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S",
                                                        time.localtime(finished_at))}
    row.update({k: v for k, v in settings.items()})
    row.update({k: v for k, v in metrics.items() if not isinstance(v, (dict, list))})
    row["git_commit"] = metadata.get("git_commit")
    row["git_dirty"] = metadata.get("git_dirty")
    row["code_version"] = metadata.get("code_version")
    row["code_id"] = metadata.get("code_id")
    if metadata.get("code_versions_mixed"):
        row["code_versions_mixed"] = metadata["code_versions_mixed"]
    for key in ROW_METADATA:  # only where recorded: older runs keep their columns
        if metadata.get(key):
            row[key] = metadata[key]
    row["wall_s"] = round(sum(run.timings.values()), 3)
    return row


def folder_row(run: Run, data: dict[str, Any], finished_at: float | None) -> dict[str, Any]:
    """The row `commit` wrote, rebuilt from the run's metrics.json content (`data`): the
    same columns and values (wall_s from its timings); finished_at is the caller's."""
    rebuilt = Run(run.experiment, run.run_id, run.root,
                  timings=dict(data.get("timings_s") or {}))
    return csv_row(rebuilt, dict(data.get("metrics") or {}), dict(data.get("settings") or {}),
                   dict(data.get("metadata") or {}), finished_at=finished_at)


def restore_row(run: Run) -> bool:
    """Rebuild a finished run's missing CSV row from its metrics.json (the same columns
    `commit` writes; finished_at is the file's time). Returns whether a row was added."""
    if any(r.get("run_id") == run.run_id for r in read_csv(run.csv_path)):
        return False  # the common case reads the CSV once, without the lock
    path = run.final_dir / "metrics.json"
    row = folder_row(run, read_metrics(path), finished_at=path.stat().st_mtime)
    append_csv_row(run.csv_path, row)  # replaces by run id: two restoring skips leave one row
    log.warning("Run %s/%s was finished but missing from %s: its row was restored from %s.",
                run.experiment, run.run_id, run.csv_path, path)
    return True


def append_csv_row(path: Path, row: dict[str, Any]) -> None:
    """Append under a file lock; a row with new columns rewrites the file with the union
    header. A rerun of the same run id replaces its earlier row instead of duplicating it."""
    with locked(path):
        rows = read_csv(path)
        rows = [r for r in rows if r.get("run_id") != str(row["run_id"])]
        rows.append({k: ("" if v is None else v) for k, v in row.items()})
        _write_rows(path, rows)


def drop_csv_row(path: Path, run_id: str) -> None:
    """Remove one run's row (overwrite=true), under the same lock as appends."""
    if not Path(path).exists():
        return
    with locked(path):
        rows = read_csv(path)
        kept = [r for r in rows if r.get("run_id") != str(run_id)]
        if len(kept) != len(rows):
            _write_rows(path, kept, header_of=rows)


def _write_rows(path: Path, rows: list[dict[str, Any]],
                header_of: list[dict[str, Any]] | None = None) -> None:
    """Rewrite the CSV atomically with the union header of `header_of` (default: rows)."""
    header: list[str] = []
    for r in rows if header_of is None else header_of:
        header += [k for k in r if k not in header]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def read_csv(path: Path) -> list[dict[str, str]]:
    """An experiment's CSV rows; binary garbage raises a DataError naming the CSV and line
    (ragrepro.run_files). The rows are not checked against the run folders here: the
    report's reader and `ragrepro check` do that (ragrepro.results_check)."""
    if not Path(path).exists():
        return []
    reader = csv.DictReader(io.StringIO(read_csv_text(path), newline=""))
    try:
        return list(reader)
    except csv.Error as e:
        raise csv_damaged(path, f"unreadable CSV: {e}", reader.line_num) from e
