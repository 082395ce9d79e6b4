"""The core's `runs` results-table layout (used by RICHES, RALM Fig. 8 and any plug-in
method): one row per setting of the spec's `by` columns, read
from the runner's results/<method>/<table>.csv; each metric with its 95% CI over the run's
questions; with a `reference`, every other row carries the reference minus the row on the
same questions (paired CI, permutation p, ≈0 mark). Columns and notes come from the spec."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..io import atomic_write_text
from .flags import flags_column
from .keyed import one_per_cell
from .runs import experiment_runs
from .samples import DEFAULT_STATS, StatsSettings, run_metrics
from .stats_cells import ci_text, csv_text, fmt_compact, paired_text

# The spec fields this layout reads (ragrepro.report.result_specs refuses any other).
FIELDS = frozenset({"title", "by", "metrics", "ci_metrics", "context", "paired", "reference",
                    "pair_on", "note", "note_columns", "row_hook"})
Row = dict[str, str]
RunDir = Callable[[Row], "Path | None"]
# CSV bookkeeping columns that are neither metrics nor settings.
_BOOKKEEPING = ("run_id", "finished_at", "wall_s", "git_commit", "git_dirty", "code_version",
                "code_id", "code_versions_mixed")


def _no_dir(_row: Row) -> Path | None:
    return None


def sort_key(v: str) -> tuple[int, float, str]:
    """Numbers in numeric order (1, 5, 10, 20), then text."""
    try:
        return (0, float(v), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(v))


def _settings_of(spec: dict[str, Any], run_dir: RunDir) -> Callable[[Row], dict]:
    def settings(r: Row) -> dict:
        recorded = run_metrics(run_dir(r))[1]
        return recorded or {k: v for k, v in r.items() if k not in spec["metrics"]
                            and k not in _BOOKKEEPING}
    return settings


def _cell(r: Row, col: str, spec: dict[str, Any], run_dir: RunDir) -> str:
    """A metric with its 95% CI over questions when the run's records give one."""
    text = fmt_compact(r.get(col, ""))
    if col not in spec["ci_metrics"] or not text:
        return text
    return ci_text(run_dir(r), col, text, 3, " (no CI)")


def paired_vs_reference(r: Row, rows: Sequence[Row], metric: str, spec: dict[str, Any],
                        run_dir: RunDir) -> str:
    """Reference minus this row on the same questions: paired 95% CI, p, ≈0 mark."""
    ref = spec["reference"]
    if r.get(ref["column"]) in (ref["value"], None, "") or r.get(metric) in (None, ""):
        return ""
    same = [x for x in rows if x.get(ref["column"]) == ref["value"]
            and all(x.get(k, "") == r.get(k, "") for k in spec["pair_on"])]
    if len(same) != 1 or same[0].get(metric) in (None, ""):
        return f"(no {ref['label']} run to pair)"
    diff = float(same[0][metric]) - float(r[metric])
    return paired_text(run_dir(same[0]), run_dir(r), metric, f"{diff:+.3f}", 3)


def table_rows(rows: Sequence[Row], spec: dict[str, Any],
               run_dir: RunDir = _no_dir) -> tuple[list[str], list[list[str]]]:
    """One line per setting, sorted by the setting columns; two runs of one setting are
    refused, naming what differs. Metrics carry their 95% CI; with a reference, the other
    rows carry the reference minus the row as a paired test."""
    by = list(spec["by"])
    key = by + ["model", "dataset"]
    kept = one_per_cell(rows, key, spec["name"].split("/")[0].upper() + " table",
                        _settings_of(spec, run_dir))
    kept.sort(key=lambda r: tuple(sort_key(r.get(c, "")) for c in key))
    metrics = [m for m in spec["metrics"] if any(r.get(m) not in (None, "") for r in kept)]
    context = [c for c in spec["context"] if c not in by]
    paired = [m for m in spec.get("paired") or [] if m in metrics]
    label = (spec.get("reference") or {}).get("label", "")
    flags = flags_column(kept)  # None: no row records diagnostics, no column
    header = (by + metrics + [f"{label} − row: {m}" for m in paired]
              + (["flags"] if flags is not None else []) + context)
    body = [[_cell(r, c, spec, run_dir) for c in by + metrics]
            + [paired_vs_reference(r, kept, m, spec, run_dir) for m in paired]
            + ([flags[i]] if flags is not None else [])
            + [fmt_compact(r.get(c, "")) for c in context] for i, r in enumerate(kept)]
    return header, body


def shared_settings_note(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """A sentence stating settings the table leaves out to stay readable (`note_columns`):
    the value when every row shares it, else that it varies, so a reader never has to guess
    what a hidden column held."""
    parts = []
    for col in columns:
        values = sorted({fmt_compact(r.get(col, "")) for r in rows} - {""})
        if len(values) == 1:
            parts.append(f"{col} = {values[0]}")
        elif values:
            parts.append(f"{col} varies by row ({len(values)} values)")
    return ("Settings not shown as columns (all in the CSV): " + "; ".join(parts) + ".") \
        if parts else ""


def to_markdown(title: str, header: list[str], body: list[list[str]], note: str = "") -> str:
    lines = [f"# {title}", ""]
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def _hook(spec: dict[str, Any]) -> Callable[[Row, Path], Row]:
    """The spec's `row_hook` ('module:function', called with the row and the runs folder)."""
    if not spec.get("row_hook"):
        return lambda row, _runs: row
    module, _, name = spec["row_hook"].partition(":")
    return getattr(importlib.import_module(module), name)


def write(spec: dict[str, Any], results: Path) -> tuple[Path, Path]:
    """results/<name>_table.md and .csv from results/<name>.csv and its run folders."""
    name = spec["name"]
    src = results / f"{name}.csv"
    if not src.exists():
        raise DataError(f"{src} does not exist: run `ragrepro -m experiment={name}` first.")
    runs = results / name
    hook = _hook(spec)
    rows = [hook(dict(r.text), runs) for r in experiment_runs(results, name)]
    header, body = table_rows(rows, spec, lambda r: runs / str(r.get("run_id")))
    note = spec.get("note", "").format(resamples=DEFAULT_STATS.resamples,
                                       seed=DEFAULT_STATS.seed)
    shared = shared_settings_note(rows, spec.get("note_columns") or [])
    note = " ".join(p for p in (note, shared) if p)
    md = results / f"{name}_table.md"
    out_csv = results / f"{name}_table.csv"
    title = spec["title"].format(table=name.split("/")[-1])
    atomic_write_text(md, to_markdown(title, header, body, note))
    atomic_write_text(out_csv, csv_text(header, body))
    return md, out_csv


def write_layout(spec: dict[str, Any], root: Path, _experiment: str, _st: StatsSettings,
                 _paper_scale: bool) -> list[Path]:
    """The layout entry point (ragrepro.report.results_tables): the spec's own experiment."""
    return list(write(spec, root))
