"""The one reader of results/: every table, the dashboard, `compare` and `samples` get their
runs here. A run is a row of the experiment's CSV (the index: results/<experiment>.csv, one
row per finished run) joined with its folder's config.json and metrics.json, plus any finished
folder the index lacks (a CSV deleted by hand). A runner's index is checked against the
folders first (ragrepro.results_check.validated_rows): a row that differs from its folder's
metrics.json is rewritten from it, a row without a finished folder is dropped, each with a
warning; a damaged run file or CSV stops the read with a DataError naming it. `RunRecord.text`
keeps the index row as written (strings), for the layouts that format the recorded text.

Committed evidence (ragrepro.evidence): an experiment without a finished run folder of its
own, whose bundle results/evidence/<experiment>.jsonl.gz exists (a fresh clone), is read
from the bundle, unpacked into the cache folder; `RunRecord.dir` then points there. Local
runs always win: one finished folder of the experiment and its bundle is not read. Every
reader (tables, `samples`, `compare`, the report and dashboard) gets this through
`experiment_runs`, `load_runs` and `runs_root`."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import evidence
from ..errors import ConfigError
from ..results_check import validated_rows
from ..run_files import read_metrics, read_run_json

log = logging.getLogger(__name__)

# Folders under results/ that hold derived output, never runs.
DERIVED_DIRS = ("report", "evidence")
# Columns every runner row has (tracking.csv_row); a CSV without them is derived output
# (a table builder's summary such as results/ralm/table1_summary.csv), never a list of runs.
RUN_CSV_COLUMNS = frozenset({"run_id", "experiment", "finished_at"})


@dataclass
class RunRecord:
    experiment: str
    run_id: str
    row: dict[str, Any]                        # CSV row, numbers parsed
    dir: Path | None = None                     # results/<experiment>/<run_id>
    config: dict[str, Any] = field(default_factory=dict)
    metrics_json: dict[str, Any] = field(default_factory=dict)
    text: dict[str, str] = field(default_factory=dict)   # the index row as written

    @property
    def mtime(self) -> float:
        """When metrics.json was written (0.0 without a folder): the age of a finished run."""
        return (self.dir / "metrics.json").stat().st_mtime if self.dir else 0.0

    @property
    def metadata(self) -> dict[str, Any]:
        return self.metrics_json.get("metadata") or {}

    @property
    def metrics(self) -> dict[str, Any]:
        return self.metrics_json.get("metrics") or {}

    @property
    def settings(self) -> dict[str, Any]:
        return self.metrics_json.get("settings") or {}

    def get(self, key: str) -> Any:
        """A setting or metric by name: CSV row first, then metrics.json."""
        value = self.row.get(key)
        if is_missing(value):
            value = self.settings.get(key, self.metrics.get(key))
        return None if is_missing(value) else value


def is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value.strip() in ("", "None", "null", "nan")


def parse_value(text: Any) -> Any:
    """CSV cells are strings: turn numbers and booleans back into values."""
    if not isinstance(text, str):
        return text
    s = text.strip()
    if s in ("", "None", "null"):
        return None
    if s in ("True", "true"):
        return True
    if s in ("False", "false"):
        return False
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def to_float(value: Any) -> float | None:
    if is_missing(value) or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) else out


def _read_json(path: Path) -> dict[str, Any]:
    """A run folder's metrics.json or config.json: damage raises a DataError naming the file
    and the fix (ragrepro.run_files), never a skipped run or a KeyError later."""
    return read_metrics(path) if path.name == "metrics.json" else read_run_json(path)


def _is_derived(path: Path, root: Path) -> bool:
    rel = path.relative_to(root).parts
    return bool(rel) and rel[0] in DERIVED_DIRS


def _is_run_csv(path: Path) -> bool:
    try:  # the first line only: binary garbage further down is the reader's to report
        with open(path, "rb") as f:
            header = f.readline().decode("utf-8", errors="replace").strip().split(",")
    except OSError:
        return False
    return RUN_CSV_COLUMNS <= {h.strip() for h in header}


def experiment_csvs(root: Path) -> dict[str, Path]:
    """experiment name ('ralm/table1') -> results/ralm/table1.csv (runner CSVs only)."""
    out = {}
    for path in sorted(root.rglob("*.csv")):
        if _is_derived(path, root) or not _is_run_csv(path):
            continue
        out[path.relative_to(root).with_suffix("").as_posix()] = path
    return out


def _attach_dir(run: RunRecord, root: Path) -> None:
    d = root / run.experiment / run.run_id
    if (d / "metrics.json").exists():
        run.dir = d
        run.metrics_json = _read_json(d / "metrics.json")
        if (d / "config.json").exists():
            run.config = _read_json(d / "config.json")


def _index_record(raw: dict[str, str], experiment: str, root: Path) -> RunRecord | None:
    """The record of one index row joined with its folder; None for a row without run id."""
    text = {k: v for k, v in raw.items() if k is not None}
    row = {k: parse_value(v) for k, v in text.items()}
    run_id = str(row.get("run_id") or "")
    if not run_id:
        return None
    rec = RunRecord(str(row.get("experiment") or experiment), run_id, row, text=text)
    _attach_dir(rec, root)
    return rec


def _folder_record(mpath: Path, root: Path, experiment: str | None = None) -> RunRecord | None:
    """A finished folder's record, its row rebuilt from metrics.json as the runner writes it.
    Given the experiment, the folder's place names the run when metrics.json does not."""
    data = _read_json(mpath)
    exp = experiment or data.get("experiment")
    run_id = data.get("run_id") or (mpath.parent.name if experiment else None)
    if not exp or not run_id:
        return None
    row = {"run_id": run_id, "experiment": exp, **(data.get("settings") or {}),
           **{k: v for k, v in (data.get("metrics") or {}).items()
              if not isinstance(v, (dict, list))}}
    rec = RunRecord(exp, run_id, row,
                    text={k: "" if v is None else str(v) for k, v in row.items()})
    _attach_dir(rec, root)
    return rec


def _finished_folders(base: Path, root: Path) -> list[Path]:
    return [p for p in sorted(base.rglob("metrics.json"))
            if not _is_derived(p, root) and not p.parent.name.startswith("tmp_")]


def _recorded_text(rec: RunRecord) -> dict[str, str]:
    """What the run folder records (settings and scalar metrics), as the CSV writes it."""
    values = {**rec.settings, **{k: v for k, v in rec.metrics.items()
                                 if not isinstance(v, (dict, list))}}
    return {k: "" if v is None else str(v) for k, v in values.items()}


def has_local_runs(root: Path, experiment: str) -> bool:
    """Whether the experiment has a finished run folder under root (never tmp_)."""
    return bool(evidence.finished_run_dirs(Path(root), experiment))


def _from_bundle(bundle: Path, experiment: str) -> Path:
    """The unpacked bundle's results folder, announced with where the runs come from."""
    source = evidence.unpacked(bundle, experiment)
    n = len(evidence.finished_run_dirs(source, experiment))
    log.info("read %d runs from %s (committed evidence; no local runs)", n,
             evidence.shown(bundle))
    return source


def runs_root(root: Path, experiment: str) -> Path:
    """The results folder the experiment's runs are read from: root itself when it holds a
    finished run of the experiment (or no bundle of it), else its committed evidence bundle
    unpacked into the cache. Table layouts read the run folders (and CSV) under it and write
    their tables under root."""
    root = Path(root)
    bundle = evidence.bundle_path(root, experiment)
    if has_local_runs(root, experiment) or not bundle.is_file():
        return root
    return _from_bundle(bundle, experiment)


def experiment_runs(root: Path, experiment: str) -> list[RunRecord]:
    """The runs of one experiment: its index rows in file order, then its finished folders
    the index lacks (by run id). The folder is the source of the values: where it records a
    column of the index row (a setting or a scalar metric), its value replaces the row's copy
    in `text`; the index keeps its bookkeeping columns and says which columns there are.
    Without a finished folder under root, the runs of its committed bundle (`runs_root`)."""
    return _local_experiment_runs(runs_root(root, experiment), experiment)


def _local_experiment_runs(root: Path, experiment: str) -> list[RunRecord]:
    root = Path(root)
    raws, checked = validated_rows(root, experiment)  # the index against the folders
    runs = [r for r in (_index_record(raw, experiment, root) for raw in raws)
            if r is not None and (r.dir is not None or not checked)]
    for rec in runs:
        recorded = _recorded_text(rec)
        rec.text = {k: recorded.get(k, v) for k, v in rec.text.items()}
    known = {r.run_id for r in runs}
    for mpath in sorted((root / experiment).glob("*/metrics.json")):
        if mpath.parent.name.startswith("tmp_"):
            continue
        rec = _folder_record(mpath, root, experiment)
        if rec is not None and rec.run_id not in known:
            runs.append(rec)
    return runs


def load_runs(root: Path, experiment: str | None = None) -> list[RunRecord]:
    """Every finished run under root, one record per run id (CSV rows plus folders that
    finished but whose CSV row is missing, e.g. a CSV deleted by hand), plus the runs of each
    committed bundle under root/evidence/ whose experiment has no finished folder here.
    Given an experiment, its runs only: no other experiment's bundle is unpacked."""
    root = Path(root)
    if not root.exists():
        return []
    runs = _local_runs(root)
    if experiment is not None:
        runs = {k: v for k, v in runs.items() if k[0] == experiment}
    local = {e for e in {e for e, _ in runs} if has_local_runs(root, e)}
    for name, bundle in evidence.bundles(root).items():
        if name in local or experiment not in (None, name):
            continue
        for key in [k for k in runs if k[0] == name]:  # rows without a folder
            del runs[key]
        for rec in _local_experiment_runs(_from_bundle(bundle, name), name):
            runs[(rec.experiment, rec.run_id)] = rec
    return sorted(runs.values(), key=lambda r: (r.experiment, str(r.row.get("finished_at") or ""),
                                                r.run_id))


def _local_runs(root: Path) -> dict[tuple[str, str], RunRecord]:
    runs: dict[tuple[str, str], RunRecord] = {}
    for experiment in experiment_csvs(root):
        raws, checked = validated_rows(root, experiment)  # the index against the folders
        for raw in raws:
            rec = _index_record(raw, experiment, root)
            if rec is not None and (rec.dir is not None or not checked):
                runs[(rec.experiment, rec.run_id)] = rec
    for mpath in _finished_folders(root, root):
        rec = _folder_record(mpath, root)
        if rec is not None and (rec.experiment, rec.run_id) not in runs:
            runs[(rec.experiment, rec.run_id)] = rec
    return runs


def find_run(root: Path, ref: str) -> RunRecord:
    """A run by folder path, `experiment/run_id`, or bare run id (unique prefix allowed)."""
    path = Path(ref)
    if (path / "metrics.json").exists():
        data = _read_json(path / "metrics.json")
        exp = str(data.get("experiment") or path.parent.name)
        rec = RunRecord(exp, str(data.get("run_id") or path.name),
                        {**(data.get("settings") or {}), **(data.get("metrics") or {})})
        rec.dir, rec.metrics_json = path, data
        if (path / "config.json").exists():
            rec.config = _read_json(path / "config.json")
        return rec
    runs = load_runs(root)
    hits = [r for r in runs if ref in (r.run_id, f"{r.experiment}/{r.run_id}")]
    if not hits:
        hits = [r for r in runs if r.run_id.startswith(ref)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise ConfigError(f"No run {ref!r}: give a run folder (results/<experiment>/<run_id>) "
                          f"or a run id found under {root} ({len(runs)} runs there).")
    raise ConfigError(f"{ref!r} matches {len(hits)} runs "
                      f"({', '.join(r.experiment + '/' + r.run_id for r in hits[:5])}); "
                      f"give more of the id or experiment/run_id.")
