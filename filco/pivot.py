"""The `filco.tables` results-table layout (FilCo): rows of settings, one column per value of the pivoted
setting (Full / Psg / FilCo / Silver, a silver measure, top-k), each of our numbers with its
95% CI over the questions, FilCo − Full as a paired test, and the paper's numbers beside
them (filco.pivot_paper). Labels, orders and column maps come from the spec
(the `results:` parts of filco/conf/report/tables/filco/)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text
from ragrepro.report.flags import group_flags
from ragrepro.report.keyed import one_per_cell
from ragrepro.report.readable import readable_markdown
from ragrepro.report.runs import experiment_runs
from ragrepro.report.samples import DEFAULT_STATS, interval_for, paired_for, run_metrics
from ragrepro.report.stats_cells import ci_text, csv_text, fmt_fixed, paired_text

from .pivot_paper import (
    Grid,
    paper_grid,
    paper_markdown,
    pivot_verdict,
    verdict_cells,
    verdict_line,
)

Row = dict[str, Any]
Table = tuple[list[str], list[list[str]]]
# Columns of a FilCo CSV row that are outputs, not settings.
OUTPUTS = frozenset({"score", "score_code", "context_precision", "input_tokens",
                     "context_tokens", "context_empty", "silver_empty_train", "metric",
                     "metric_code", "recall_answer", "recall_title", "precision", "git_commit",
                     "git_dirty", "wall_s", "finished_at", "em_squad", "f1_squad", "accuracy",
                     "em_filco_code", "f1_char_filco_code", "unigram_precision",
                     "recall_at_k", "code_version", "code_id", "code_versions_mixed"})


def with_run_dirs(root: Path, experiment: str) -> list[Row]:
    """The experiment's runs (ragrepro.report.runs) as their recorded CSV text, each with
    `_dir`: its run folder (per-sample records for the CIs)."""
    return [{**r.text, "_dir": r.dir or root / experiment / r.run_id}
            for r in experiment_runs(root, experiment)]


def _settings_of(r: Row) -> dict:
    settings = run_metrics(r.get("_dir"))[1]
    return settings or {k: v for k, v in r.items() if k not in OUTPUTS and k != "_dir"}


def _latest(rows: Sequence[Row], key: Sequence[str], spec: dict[str, Any]) -> list[Row]:
    """One row per key; two runs with the same key are refused, naming the differing setting
    (a table never silently keeps the newest of two settings)."""
    return one_per_cell(rows, key, spec["label"], _settings_of)


def _ci(r: Row, value: str, nd: int = 1) -> str:
    """The row's value with its 95% bootstrap CI over questions (per-sample records)."""
    return ci_text(r.get("_dir"), value, fmt_fixed(r.get(value), nd), nd, " (no CI)")


def _paired_delta(a: Row, b: Row, value: str) -> str:
    """a - b on the same questions, its paired 95% CI, permutation p and the ≈0 mark."""
    diff = fmt_fixed(float(a[value]) - float(b[value]))
    return paired_text(a.get("_dir"), b.get("_dir"), value, diff, 1)


def _family(spec: dict[str, Any], model: str) -> str | None:
    return spec["model_family"].get(model)


def _paper_cells(spec: dict[str, Any], paper: Grid | None, key: dict[str, str]) -> list[str]:
    if paper is None:
        return []
    col = spec["task_columns"].get(key[spec["dataset_column"]])
    if spec["paper"]["grid"] == "delta":
        fam = _family(spec, key[spec["model_column"]])
        return [fmt_fixed(paper.get(fam, {}).get(col)) if col and fam else "–"]
    return [fmt_fixed(paper[s].get(col)) if col else "–" for s in spec["values"] if s in paper]


def _verdict(spec: dict[str, Any], cells: dict[str, Row]) -> str:
    """The row's reproduction verdict (filco.pivot_paper.pivot_verdict): each
    pivoted value's run with its CI, or for a `delta` grid the paired CI of plus − minus."""
    vcells, value, delta = verdict_cells(spec), spec["value"], spec.get("delta") or {}
    if spec["paper"]["grid"] == "delta":
        plus, minus = cells.get(delta.get("plus", "")), cells.get(delta.get("minus", ""))
        if plus is None or minus is None:
            return ""
        a, b = plus.get("_dir"), minus.get("_dir")
        test, _ = paired_for(a, run_metrics(a)[0], b, run_metrics(b)[0], value, "diff")
        return pivot_verdict(spec, vcells, {"delta": _settings_of(plus)},
                             {"delta": (test.low, test.high) if test else (None, None)})
    ivs = {s: interval_for(r.get("_dir"), run_metrics(r.get("_dir"))[0], value)
           for s, r in cells.items()}
    return pivot_verdict(spec, vcells, {s: _settings_of(r) for s, r in cells.items()},
                         {s: (iv.low, iv.high) if iv else (None, None)
                          for s, iv in ivs.items()})


def _row_keys(rows: Sequence[Row], spec: dict[str, Any]) -> list[tuple[str, ...]]:
    return sorted({tuple(r.get(c, "") for c in spec["rows"]) for r in rows})


def _group(rows: Sequence[Row], spec: dict[str, Any], key: tuple[str, ...]) -> dict[str, Row]:
    """The key's rows, by their value of the pivoted setting, in the table's column order
    (values the spec does not show last, by name): a line's flags cell lists its runs in the
    order the columns show them, whatever order the runs were read in (run folders or an
    evidence bundle)."""
    group = {str(r[spec["pivot"]]): r for r in rows
             if tuple(r.get(c, "") for c in spec["rows"]) == key}
    shown = [str(v) for v in spec.get("values") or ()]
    order = sorted(group, key=lambda v: (shown.index(v) if v in shown else len(shown), v))
    return {v: group[v] for v in order}


def settings_table(rows: Sequence[Row], spec: dict[str, Any], paper: Grid | None) -> Table:
    """Rows (spec.rows) x the pivoted settings; the spec's delta as a paired test; the
    paper's values beside."""
    values, delta = spec["values"], spec.get("delta")
    rows = _latest(rows, [*spec["cell"], spec["pivot"]], spec)
    header = [*spec["row_labels"], "n_eval", *values]
    has_delta = bool(delta) and delta["plus"] in values and delta["minus"] in values
    if has_delta:
        header.append(spec.get("delta_label") or delta["label"])
    if paper is not None:
        header += ([f"paper {s}" for s in values if s in paper]
                   if spec["paper"]["grid"] != "delta" else [f"paper {delta['label']}"])
    if spec.get("reduction"):
        header.append(spec["reduction"])
    header += [d["label"] for d in spec.get("diagnostics") or []]
    verdicts = bool(verdict_cells(spec))
    if verdicts:
        header.append("verdict vs paper")
    return header, [_settings_line(rows, key, spec, paper, has_delta)
                    + ([_verdict(spec, _group(rows, spec, key))] if verdicts else [])
                    for key in _row_keys(rows, spec)]


def _settings_line(rows: Sequence[Row], key: tuple[str, ...], spec: dict[str, Any],
                   paper: Grid | None, has_delta: bool) -> list[str]:
    value, delta = spec["value"], spec.get("delta") or {}
    cells = _group(rows, spec, key)
    n = next(iter(cells.values())).get("n_eval", "")
    line = [*key, n] + [_ci(cells[s], value) if s in cells else "–" for s in spec["values"]]
    if has_delta:
        try:
            line.append(_paired_delta(cells[delta["plus"]], cells[delta["minus"]], value))
        except (KeyError, ValueError):
            line.append("–")
    line += _paper_cells(spec, paper, dict(zip(spec["rows"], key)))
    if spec.get("reduction"):
        first = len(key) + 1
        try:
            base = float(line[first + spec["values"].index(delta["minus"])].split()[0])
            new = float(line[first + spec["values"].index(delta["plus"])].split()[0])
            line.append(fmt_fixed(100 * (base - new) / base))
        except ValueError:
            line.append("–")
    return line + [_diagnostic_cell(cells, d) for d in spec.get("diagnostics") or []]


def _diagnostic_cell(cells: dict[str, Row], diag: dict[str, Any]) -> str:
    """One diagnostic rate (x100) of each of the spec's pivoted values, joined by " / "
    in the label's order; "–" for a value without a run or without the column."""
    def rate(value: str) -> str:
        got = cells.get(value, {}).get(diag["metric"])
        return "–" if got in (None, "") else fmt_fixed(100 * float(got), 0)
    return " / ".join(rate(v) for v in diag["values"])


def measures_table(rows: Sequence[Row], spec: dict[str, Any], paper: Grid | None) -> Table:
    """Rows (spec.rows) x the measure that built the silver contexts."""
    measures, value, labels = spec["values"], spec["value"], spec["labels"]
    rows = _latest(rows, [*spec["cell"], spec["pivot"]], spec)
    verdicts = bool(verdict_cells(spec))
    header = [*spec["row_labels"], *labels, "silver empty (train) "
              + "/".join(x[0] for x in labels), *[f"paper {x}" for x in labels],
              *(["verdict vs paper"] if verdicts else [])]
    body = []
    for key in _row_keys(rows, spec):
        cell, k = _group(rows, spec, key), dict(zip(spec["rows"], key))
        got = (paper or {}).get(_family(spec, k[spec["model_column"]]) or "", {}).get(
            spec["task_columns"].get(k[spec["dataset_column"]], ""))
        body.append([*key] + [_ci(cell[m], value) if m in cell else "–" for m in measures]
                    + ["/".join(fmt_fixed(100 * float(cell[m]["silver_empty_train"]), 0)
                                if m in cell else "–" for m in measures)]
                    + [fmt_fixed(got[i]) if got else "–" for i in range(len(measures))]
                    + ([_verdict(spec, cell)] if verdicts else []))
    return header, body


def retrieval_table(rows: Sequence[Row], spec: dict[str, Any], paper: Grid | None) -> Table:
    """One row per spec.rows key, one column per (metric, pivot value) of the spec's
    `cells`; the paper's (top-1 / top-5) pairs beside."""
    rows = _latest(rows, [*spec["cell"], spec["pivot"]], spec)
    measures = spec["paper"]["measures"]
    header = [*spec["row_labels"], "n_eval", *[c["label"] for c in spec["cells"]],
              *[f"paper {m}" for m in measures]]
    body = []
    for key in _row_keys(rows, spec):
        by_k = _group(rows, spec, key)
        col = spec["task_columns"].get(dict(zip(spec["rows"], key))[spec["dataset_column"]])
        body.append([*key, next(iter(by_k.values())).get("n_eval", "")]
                    + [_ci(by_k[c["k"]], c["metric"]) if c["k"] in by_k else "–"
                       for c in spec["cells"]]
                    + [" / ".join(map(fmt_fixed, paper[m][col])) if col and paper else "–"
                       for m in measures])
    return header, body


_KINDS = {"settings": settings_table, "measures": measures_table, "retrieval": retrieval_table}


def with_flags(table: Table, rows: Sequence[Row], spec: dict[str, Any]) -> Table:
    """A `flags` column (ragrepro.report.flags) naming, per line, each pivoted run whose
    diagnostics cross a threshold ("filco: ctx_empty 35%"); no column when no run of the
    table recorded diagnostics. Every kind writes one line per _row_keys key, in order."""
    header, body = table
    kept = _latest(rows, [*spec["cell"], spec["pivot"]], spec)
    cells = [group_flags(_group(kept, spec, key)) for key in _row_keys(kept, spec)]
    if all(c is None for c in cells):
        return header, body
    return [*header, "flags"], [[*line, c or ""] for line, c in zip(body, cells)]


def shown_path(path: Path) -> str:
    """A path as a committed table names it: relative to the working directory (the
    repository) when under it, so no machine's folder ends up in a committed file."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def write(spec: dict[str, Any], root: Path, prefix: str = "filco") -> Path:
    """<root>/<prefix>/<exp>_table.md and .csv from <exp>.csv and its run folders."""
    exp = spec["name"].split("/")[-1]
    src = root / prefix / f"{exp}.csv"
    rows = with_run_dirs(root, f"{prefix}/{exp}")
    if not rows:
        raise DataError(f"No results in {src}: run `ragrepro -m experiment={prefix}/{exp}` "
                        f"first.")
    paper = paper_grid(spec)
    header, body = with_flags(_KINDS[spec["kind"]](rows, spec, paper), rows, spec)
    notes = spec["notes"]
    note = notes["paper" if prefix.rstrip("/").endswith("paper") else "mini"] + (
        f" {notes['metric']}" if spec["metric_note"] else "")
    stats = notes["stats"].format(resamples=DEFAULT_STATS.resamples, seed=DEFAULT_STATS.seed)
    vcells = verdict_cells(spec)
    verdict = f"{verdict_line(vcells)}\n\n" if vcells else ""
    table = readable_markdown(header, body, len(spec["row_labels"]))  # <= 10 columns each
    md = (f"## {spec['title']}\n\n{note}\n\n{stats}\n\n{table}\n\n"
          f"{verdict}{paper_markdown(spec, paper)}\n\nSource: {shown_path(src)}\n")
    out = root / prefix / f"{exp}_table.md"
    atomic_write_text(out, md)
    atomic_write_text(out.with_suffix(".csv"), csv_text(header, body))
    return out
