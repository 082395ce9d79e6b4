"""The core's `runs` results-table layout (used by RICHES, RALM Fig. 8 and any plug-in
method): one row per setting of the spec's `by` columns, read
from the runner's results/<method>/<table>.csv; each metric with its 95% CI over the run's
questions; with a `reference`, every other row carries the reference minus the row on the
same questions (paired CI, permutation p, ≈0 mark). Columns and notes come from the spec.

The Markdown table is meant for reading: at most ten columns (ragrepro.report.readable),
settings named by `note_columns` stated in the note. The CSV beside it holds those columns
and the spec's `csv_also` (metrics, paired tests and settings left out of the Markdown)."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError
from ..io import atomic_write_text
from .flags import flags_column
from .keyed import one_per_cell
from .readable import MAX_COLUMNS, check_columns
from .runs import experiment_runs, runs_root
from .samples import DEFAULT_STATS, StatsSettings, run_metrics
from .stats_cells import ci_text, csv_text, fmt_compact, paired_text

# The spec fields this layout reads (ragrepro.report.result_specs refuses any other).
FIELDS = frozenset({"title", "by", "metrics", "ci_metrics", "context", "paired", "reference",
                    "pair_on", "note", "note_columns", "row_hook", "csv_also", "one_of"})
# What `csv_also` may add to the CSV: more metrics, paired tests and setting columns.
CSV_ALSO_KEYS = ("metrics", "paired", "context")
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
    # every metric of the spec, the CSV's own too, is an outcome, never a setting
    outcomes = {*spec["metrics"], *((spec.get("csv_also") or {}).get("metrics") or [])}

    def settings(r: Row) -> dict:
        recorded = run_metrics(run_dir(r))[1]
        return recorded or {k: v for k, v in r.items() if k not in outcomes
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
    flags = flags_column(kept)  # None: no row records diagnostics, no column
    header = header_of(spec, metrics, flags is not None)
    body = [[_cell(r, c, spec, run_dir) for c in by + metrics]
            + [paired_vs_reference(r, kept, m, spec, run_dir) for m in paired]
            + ([flags[i]] if flags is not None else [])
            + [fmt_compact(r.get(c, "")) for c in context] for i, r in enumerate(kept)]
    return header, body


def header_of(spec: dict[str, Any], metrics: Sequence[str], flags: bool) -> list[str]:
    """The table's columns: `by`, the metrics present, the paired tests, flags, context."""
    label = (spec.get("reference") or {}).get("label", "")
    paired = [m for m in spec.get("paired") or [] if m in metrics]
    return (list(spec["by"]) + list(metrics) + [f"{label} − row: {m}" for m in paired]
            + (["flags"] if flags else []) + [c for c in spec["context"] if c not in spec["by"]])


def widest_header(spec: dict[str, Any]) -> list[str]:
    """The Markdown columns of the spec when every metric has a value (but one of each
    `one_of` group: metrics no run records together, e.g. the TRUE AutoAIS and its offline
    substitute) and a row records diagnostics: what `readable.check_columns` must accept."""
    later = {m for group in spec.get("one_of") or [] for m in list(group)[1:]}
    return header_of(spec, [m for m in spec["metrics"] if m not in later], True)


def csv_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec of the CSV beside the Markdown table: its columns, the `note_columns` and
    everything `csv_also` adds."""
    also = spec.get("csv_also") or {}
    unknown = set(also) - set(CSV_ALSO_KEYS)
    if not isinstance(also, dict) or unknown:
        raise ConfigError(f"results table {spec['name']}: `csv_also` maps "
                          f"{'/'.join(CSV_ALSO_KEYS)} to column lists, not {also!r}.")

    def more(key: str, extra: Sequence[str] = ()) -> list[str]:
        return list(dict.fromkeys([*(spec.get(key) or []), *extra, *(also.get(key) or [])]))

    return {**spec, "metrics": more("metrics"), "paired": more("paired"),
            "context": more("context", spec.get("note_columns") or [])}


def _note_part(col: str, rows: Sequence[Row]) -> str:
    texts = [fmt_compact(r.get(col, "")) for r in rows]
    values = sorted(set(texts) - {""}, key=sort_key)
    if not values:
        return ""
    if len(values) > 1:
        shown = ", ".join(values[:4]) + (f", … ({len(values)} values)" if len(values) > 4 else "")
        return f"{col} varies by row ({shown})"
    have = sum(t != "" for t in texts)
    return f"{col} = {values[0]}" + ("" if have == len(texts) else
                                      f" ({have} of {len(texts)} rows; the others have none)")


def shared_settings_note(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """A sentence stating settings the table leaves out to stay readable (`note_columns`):
    the value when every row shares it (and on how many rows, when some have none), else the
    values it takes, so a reader never has to guess what a hidden column held."""
    parts = [p for p in (_note_part(col, rows) for col in columns) if p]
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
    """results/<name>_table.md and .csv from results/<name>.csv and its run folders (or, on
    a clone without them, from the committed bundle: ragrepro.report.runs.runs_root)."""
    name = spec["name"]
    source = runs_root(results, name)  # results/, or the committed bundle unpacked
    src = source / f"{name}.csv"
    if not src.exists():
        raise DataError(f"{src} does not exist: run `ragrepro -m experiment={name}` first.")
    runs = source / name
    hook = _hook(spec)
    rows = [hook(dict(r.text), runs) for r in experiment_runs(source, name)]

    def run_dir(r: Row) -> Path:
        return runs / str(r.get("run_id"))

    header, body = table_rows(rows, spec, run_dir)
    check_columns(header, f"results table {name} (its spec: report/tables/{name}.yaml of its "
                          f"method's conf folder)", MAX_COLUMNS)
    note = spec.get("note", "").format(resamples=DEFAULT_STATS.resamples,
                                       seed=DEFAULT_STATS.seed)
    hidden = [c for c in spec.get("note_columns") or [] if c not in header]
    shared = shared_settings_note(rows, hidden)
    note = " ".join(p for p in (note, shared) if p)
    md = results / f"{name}_table.md"
    out_csv = results / f"{name}_table.csv"
    title = spec["title"].format(table=name.split("/")[-1])
    atomic_write_text(md, to_markdown(title, header, body, note))
    atomic_write_text(out_csv, csv_text(*table_rows(rows, csv_spec(spec), run_dir)))
    return md, out_csv


def write_layout(spec: dict[str, Any], root: Path, experiment: str, _st: StatsSettings,
                 paper_scale: bool) -> list[Path]:
    """The layout entry point (ragrepro.report.results_tables): the runs of `experiment`
    (the spec's name unless `--experiment` names another), with `--paper-scale` those of its
    paper-scale config <paper>/paper/<table>, the name a paper config gives its rows."""
    name = experiment or spec["name"]
    if paper_scale and "/paper/" not in f"/{name}":
        head, _, tail = name.partition("/")
        name = f"{head}/paper/{tail}"
    return list(write({**spec, "name": name}, root))
