"""Paper tables from our runs: our value next to the paper's, the difference, relative
gains over the no-retrieval baseline, and a note on what makes the two (in)comparable.

The building is pure (spec + paper cells + run rows -> TableRow list); files and CLI are
at the bottom. `ragrepro table ralm/table1` builds and prints one table.
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..io import atomic_write_json, atomic_write_text
from . import verdict as repro
from .flags import flags_text, has_diagnostics, merged_row
from .keyed import label_shared_cells
from .paper import PaperNumber, paper_table, table_info, table_recorded
from .runs import RunRecord, is_missing, load_runs, to_float
from .samples import DEFAULT_STATS
from .spec import (
    Derived,
    MetricInfo,
    _norm,
    derive_keys,
    load_metric_infos,
    load_table_specs,
    metric_info,
)
from .table_render import (  # noqa: F401 - TableRow, NOT_RUN and renderers re-exported
    NOT_RUN,
    TableRow,
    _describe,
    header,
    render_cells,
    render_html,
    render_html_table,
    render_markdown,
)
from .table_stats import RowStats, add_test, value_stats

log = logging.getLogger(__name__)

@dataclass
class _Run:
    """A run seen through one spec: its row accessor and its derived paper keys."""

    rec: Any                          # anything with .get(col), .run_id, .experiment
    derived: Derived

    def get(self, col: str) -> Any:
        return self.rec.get(col)


# ---------------------------------------------------------------- pure building blocks
def _cell_expects(cell: PaperNumber, key: str) -> Any:
    return cell.keys.get(key, cell.setting.get(key))


def run_matches(run: _Run, cell: PaperNumber, spec_keys: dict[str, Any]) -> bool:
    for key in spec_keys:
        want = _cell_expects(cell, key)
        if want is not None and _norm(run.derived.keys.get(key)) != _norm(want):
            return False
    return True


def metric_candidates(spec_metric: dict[str, Any], keys: dict[str, Any],
                      paper_metric: str | None) -> list[str]:
    """Our metric columns to try for a cell, best first: the paper's own metric when we
    record it, then the spec's list for the cell (by a key) or the default."""
    cols = spec_metric.get("columns")
    if isinstance(cols, dict):
        by = spec_metric.get("by")
        chosen = cols.get(str(keys.get(by)), cols.get("default", [])) if by else cols.get(
            "default", [])
    else:
        chosen = cols or []
    chosen = [chosen] if isinstance(chosen, str) else list(chosen)
    if paper_metric and paper_metric not in chosen and spec_metric.get("prefer_paper", True):
        chosen = [paper_metric, *chosen]
    return chosen


def run_value(run: _Run, candidates: list[str],
              infos: dict[str, MetricInfo]) -> tuple[float | None, str | None]:
    """(value in the paper's unit, metric column) from the first candidate the run has."""
    for name in candidates:
        value = to_float(run.get(name))
        if value is not None:
            return value * metric_info(name, infos).scale, name
    return None, None


def pair_signature(run: _Run, pair_on: list[str]) -> tuple[str, ...]:
    return tuple(_norm(run.get(c)) for c in pair_on)


def relative_gain(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return (value - base) / base


def canonical(metric: str, infos: dict[str, MetricInfo]) -> str:
    return metric_info(metric, infos).same_as or metric


def comparability_note(run: _Run, cell: PaperNumber | None, compare: dict[str, str],
                       metric: str | None, infos: dict[str, MetricInfo]) -> list[str]:
    """Why our number and the paper's differ in setting (empty: same setting)."""
    notes = []
    if _norm(run.get("scale")) == "mini":
        notes.append("mini scale")
    for key, (ours, theirs) in run.derived.stand_ins.items():
        notes.append(f"{key} {ours} stands in for {theirs}")
    if cell is not None:
        for paper_key, column in compare.items():
            theirs, ours = cell.setting.get(paper_key, cell.keys.get(paper_key)), run.get(column)
            if theirs is None or is_missing(ours) or paper_key in run.derived.stand_ins:
                continue
            if _norm(ours) != _norm(theirs) and to_float(ours) != to_float(theirs):
                notes.append(f"{column} {ours} (paper {theirs})")
        paper_metric = cell.setting.get("metric")
        if metric and paper_metric and canonical(metric, infos) != canonical(paper_metric, infos):
            notes.append(f"metric {metric} (paper {paper_metric})")
    limit = run.get("limit")
    if not is_missing(limit):
        notes.append(f"first {limit} examples only")
    return notes


def run_flags(rec: Any) -> str | None:
    """The flags cell of a run (its CSV row, then its metrics.json metrics); None when the
    run records no diagnostics."""
    row = merged_row(getattr(rec, "row", None), getattr(rec, "metrics", None))
    return flags_text(row) if has_diagnostics(row) else None


def _show(run: _Run, show: list[str]) -> dict[str, Any]:
    return {c: run.get(c) for c in show}


def _wrap_runs(spec: dict[str, Any], runs: list[Any]) -> list[_Run]:
    exps = set(spec.get("experiments") or [])
    return [_Run(r, derive_keys(spec.get("keys") or {}, r)) for r in runs
            if r.experiment in exps]


def _find_partner(run: _Run, runs: list[_Run], overrides: dict[str, Any],
                  spec_keys: dict[str, Any], pair_on: list[str]) -> _Run | None:
    want = {**run.derived.keys, **overrides}
    sig = pair_signature(run, pair_on)
    for other in runs:
        if other is run or pair_signature(other, pair_on) != sig:
            continue
        if all(_norm(other.derived.keys.get(k)) == _norm(want.get(k)) for k in spec_keys):
            return other
    return None


def _is_baseline(keys: dict[str, Any], baseline: dict[str, Any]) -> bool:
    return all(_norm(keys.get(k)) == _norm(v) for k, v in baseline.items())


def _paper_cell(cells: list[PaperNumber], keys: dict[str, Any]) -> PaperNumber | None:
    hits = [c for c in cells if all(_norm(c.keys.get(k)) == _norm(v) for k, v in keys.items()
                                    if k in c.keys) and set(c.keys) <= set(keys)]
    return hits[0] if len(hits) == 1 else None


def cell_verdict(run: _Run, cell: PaperNumber, metric: str | None, stats: RowStats,
                 infos: dict[str, MetricInfo]) -> str:
    """The reproduction verdict of a run against its paper cell: the cell's recorded
    settings against the run's, our metric against the paper's, then the CI rule."""
    paper_metric = cell.setting.get("metric")
    extra = ([repro.Difference("metric", metric, paper_metric)]
             if metric and paper_metric and canonical(metric, infos) != canonical(
                 paper_metric, infos) else [])
    return repro.cell_verdict(cell.recorded, run.rec, stats.ci_low, stats.ci_high, cell.value,
                              repro.margin_for(paper_metric or metric), extra).text


def build_table(spec: dict[str, Any], cells: list[PaperNumber], runs: list[Any],
                infos: dict[str, MetricInfo],
                shared: dict[str, Any] | None = None) -> list[TableRow]:
    """One row per (paper cell, matching run); a cell without runs is a 'not run' row; a run
    matching no cell is a row with no paper number. Nothing is dropped. shared: the paper
    table's own recorded settings, what a run with no paper cell is compared with."""
    spec_keys: dict[str, Any] = spec.get("keys") or {}
    baseline: dict[str, Any] = spec.get("baseline") or {}
    delta: dict[str, Any] = spec.get("delta") or {}
    average: dict[str, Any] = spec.get("average") or {}
    show: list[str] = list(spec.get("show") or [])
    wrapped = _wrap_runs(spec, runs)
    primary = [r for r in wrapped if not delta or
               _norm(r.derived.keys.get(delta["key"])) == _norm(delta["value"])]
    used: set[int] = set()
    rows: list[TableRow] = []
    avg_cells = [c for c in cells if average and
                 _norm(c.keys.get(average["key"])) == _norm(average["value"])]

    for cell in cells:
        if cell in avg_cells:
            continue
        matched = [r for r in primary if run_matches(r, cell, spec_keys)]
        base_cell = None
        if baseline and not _is_baseline({**cell.keys, **cell.setting}, baseline):
            base_cell = _paper_cell(cells, {**cell.keys, **baseline})
        paper_gain = relative_gain(cell.value, base_cell.value if base_cell else None)
        candidates = metric_candidates(spec["metric"], cell.keys, cell.setting.get("metric"))
        if not matched:
            rows.append(TableRow(f"{cell.row} · {cell.column}", NOT_RUN, dict(cell.keys),
                                 paper=cell.value, paper_gain=paper_gain,
                                 paper_metric=cell.setting.get("metric"), source=cell.source,
                                 note="no run with these settings yet", paper_row=cell.row,
                                 paper_column=cell.column))
            continue
        for run in matched:
            used.add(id(run))
            rows.append(_row_for_run(run, cell, candidates, wrapped, spec, infos,
                                     base_cell is not None, paper_gain, used))

    for cell in avg_cells:
        rows.extend(_average_rows(cell, rows, cells, average))

    for run in wrapped:
        if id(run) in used:
            continue
        if delta and _norm(run.derived.keys.get(delta["key"])) == _norm(delta.get("minus")):
            continue  # only ever a partner of a delta
        rows.append(_row_without_cell(run, spec, infos, show, shared or {}))
    label_shared_cells(rows, {r.rec.run_id: r.rec for r in wrapped})
    return rows


def _row_without_cell(run: _Run, spec: dict[str, Any], infos: dict[str, MetricInfo],
                      show: list[str], shared: dict[str, Any]) -> TableRow:
    """A run that matches no paper cell: its number, compared with the table's settings."""
    candidates = metric_candidates(spec["metric"], run.derived.keys, None)
    value, metric = run_value(run, candidates, infos)
    note = comparability_note(run, None, {}, metric, infos)
    return TableRow("(no paper cell)", "no paper number", dict(run.derived.keys),
                    ours=value, metric=metric, settings=_show(run, show),
                    note="; ".join(["the paper reports no number for these keys", *note]),
                    run_id=run.rec.run_id, experiment=run.rec.experiment,
                    stats=value_stats(run.rec, metric, metric_info(metric or "", infos).scale),
                    flags=run_flags(run.rec),
                    verdict=repro.row_verdict([], shared, run.rec,
                                              lambda _m: (None, None)).text)


def _row_for_run(run: _Run, cell: PaperNumber, candidates: list[str], wrapped: list[_Run],
                 spec: dict[str, Any], infos: dict[str, MetricInfo], has_base: bool,
                 paper_gain: float | None, used: set[int]) -> TableRow:
    spec_keys = spec.get("keys") or {}
    pair_on = list(spec.get("pair_on") or [])
    delta = spec.get("delta") or {}
    value, metric = run_value(run, candidates, infos)
    notes = comparability_note(run, cell, spec.get("compare") or {}, metric, infos)
    status = "ok"
    scale = metric_info(metric or "", infos).scale
    stats = value_stats(run.rec, metric, scale)
    if delta:
        partner = _find_partner(run, wrapped, {delta["key"]: delta["minus"]}, spec_keys, pair_on)
        if partner is None:
            value, status = None, "incomplete"
            notes.insert(0, f"no paired {delta['key']}={delta['minus']} run to subtract")
        else:
            used.add(id(partner))
            other, _ = run_value(partner, [metric] if metric else candidates, infos)
            value = None if value is None or other is None else value - other
            # a delta's own CI is the paired CI of the difference
            stats = add_test(RowStats(), run.rec, partner.rec, metric, "diff", scale)
            stats.n, stats.ci_low, stats.ci_high = (
                value_stats(run.rec, metric, scale).n, stats.test_low, stats.test_high)
    if value is None and status == "ok":
        status = "missing metric"
        notes.insert(0, f"run has none of {candidates}")
    ours_gain = None
    if has_base and value is not None:
        base = _find_partner(run, wrapped, spec.get("baseline") or {}, spec_keys, pair_on)
        if base is not None:
            base_value, _ = run_value(base, [metric] if metric else candidates, infos)
            ours_gain = relative_gain(value, base_value)
            stats = add_test(stats, run.rec, base.rec, metric, "rel", scale)
            if stats.test_note:
                notes.append(f"gain CI: {stats.test_note}")
        else:
            notes.append("no paired baseline run for the gain")
    return TableRow(
        f"{cell.row} · {cell.column}", status, dict(cell.keys), ours=value, paper=cell.value,
        verdict=cell_verdict(run, cell, metric, stats, infos),
        diff=None if value is None or cell.value is None else value - cell.value,
        ours_gain=ours_gain, paper_gain=paper_gain, metric=metric,
        paper_metric=cell.setting.get("metric"), settings=_show(run, spec.get("show") or []),
        note="; ".join(notes) or "same setting as the paper", run_id=run.rec.run_id,
        experiment=run.rec.experiment, source=cell.source,
        pair=dict(zip(pair_on, pair_signature(run, pair_on))), paper_row=cell.row,
        paper_column=cell.column, stats=stats, flags=run_flags(run.rec))


def _average_rows(cell: PaperNumber, rows: list[TableRow], cells: list[PaperNumber],
                  average: dict[str, Any]) -> list[TableRow]:
    """Mean of our per-column values (e.g. FilCo's 'Average' over six datasets), only when
    every column the paper averages has a value from the same pairing group."""
    key = average["key"]
    # Columns that vary with the averaged key (a dataset's name, variant, split) do not
    # split the groups; the rest (model, scale, limit, seed...) do.
    if not average.get("group_on"):
        raise ConfigError(f"table spec: `average` needs `group_on` (the settings that split "
                          f"the groups averaged over {key!r}), got {average!r}.")
    group_on = average["group_on"]
    others = {k: v for k, v in cell.keys.items() if k != key}
    members = [c for c in cells if c is not cell and c.row == cell.row]
    groups: dict[tuple[Any, ...], list[TableRow]] = {}
    for r in rows:
        if r.ours is None or r.status != "ok" or r.run_id is None:
            continue
        if all(_norm(r.keys.get(k)) == _norm(v) for k, v in others.items()):
            groups.setdefault(tuple(r.pair.get(c) for c in group_on), []).append(r)
    label = f"{cell.row} · {cell.column}"
    if not groups:
        return [TableRow(label, NOT_RUN, dict(cell.keys), paper=cell.value, source=cell.source,
                         note="no run with these settings yet", paper_row=cell.row,
                         paper_column=cell.column)]
    out = []
    for group in groups.values():
        have = {_norm(r.keys.get(key)) for r in group}
        need = {_norm(c.keys.get(key)) for c in members}
        if not need <= have:
            out.append(TableRow(label, "incomplete", dict(cell.keys), paper=cell.value,
                                source=cell.source, settings=group[0].settings,
                                note=f"{len(have & need)} of {len(need)} columns run; "
                                     f"missing {sorted(need - have)}", paper_row=cell.row,
                                paper_column=cell.column))
            continue
        value = sum(r.ours for r in group if _norm(r.keys.get(key)) in need) / len(need)
        out.append(TableRow(label, "ok", dict(cell.keys), ours=value, paper=cell.value,
                            diff=None if cell.value is None else value - cell.value,
                            settings=group[0].settings, source=cell.source,
                            note=f"mean of our {len(need)} per-column values (no CI: the "
                                 f"columns are different datasets)", paper_row=cell.row,
                            paper_column=cell.column))
    return out


# ------------------------------------------------------------------------- files / CLI
@dataclass
class BuiltTable:
    name: str
    title: str
    lines: list[str]
    rows: list[TableRow]
    show: list[str]
    paths: dict[str, Path]


def build_spec(spec: dict[str, Any], runs: list[RunRecord], infos: dict[str, MetricInfo],
               out_dir: Path, title_prefix: str = "") -> BuiltTable:
    paper, table = spec["paper"], spec.get("table")
    cells = paper_table(paper, table) if table else []
    caption = ""
    if table:
        caption = str(table_info(paper, table).get("caption") or "")
    rows = build_table(spec, cells, runs, infos, table_recorded(paper, table) if table else {})
    show = list(spec.get("show") or [])
    title = title_prefix + str(spec.get("title") or spec["name"])
    mine = [r for r in runs if r.experiment in set(spec.get("experiments") or [])]
    n_runs = len(mine)
    lines = _describe(spec, caption, n_runs)
    lines.append(f"Uncertainty: {DEFAULT_STATS.describe()}.")
    if table:
        lines.append(repro.margin_line([str(c.setting.get("metric")) for c in cells]))
    if any((getattr(r, "metadata", None) or {}).get("demo") for r in mine):
        lines.insert(0, "DEMO DATA: made-up numbers from tests/report/demo.py, not results.")
    if not table:
        lines.append("The paper reports no number we could transcribe for this table "
                     f"(see report/paper/{paper}.yaml in its method's conf folder); our numbers only.")
    base = out_dir / spec["name"]
    paths = {"md": base.with_suffix(".md"), "html": base.with_suffix(".html"),
             "json": base.with_suffix(".json")}
    atomic_write_text(paths["md"], render_markdown(title, lines, rows, show))
    atomic_write_text(paths["html"], render_html(title, lines, rows, show))
    atomic_write_json(paths["json"], {"name": spec["name"], "title": title, "lines": lines,
                                      "show": show, "rows": [asdict(r) for r in rows]})
    return BuiltTable(spec["name"], title, lines, rows, show, paths)


def build_all(root: Path, spec_dir: Path | None = None, names: list[str] | None = None,
              title_prefix: str = "") -> list[BuiltTable]:
    """Every table spec (or `names`) from the runs under root; rehearsal tables pass a
    title_prefix that says so."""
    runs = load_runs(root)
    infos = load_metric_infos()
    specs = load_table_specs(spec_dir)
    if names:
        specs = [s for s in specs if s["name"] in names or set(names) & set(s["experiments"])]
        if not specs:
            known = sorted({s["name"] for s in load_table_specs(spec_dir)})
            raise ConfigError(f"No report table for {names}. Known tables: {', '.join(known)}.")
    return [build_spec(s, runs, infos, root / "report", title_prefix) for s in specs]
