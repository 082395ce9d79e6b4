"""The paper's grids beside a `pivot` results table (FilCo): the numbers live once, in
filco/conf/report/paper/filco.yaml; these functions reshape them as the spec's `paper` node
says ({row: {column: value}}, or tuples per column) and print the paper's own block; and
the reproduction verdict of each of our rows against the paper's cells
(ragrepro.report.verdict: the cells' `recorded` settings pick the cell, the rule decides)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragrepro.report import verdict as repro
from ragrepro.report.paper import PaperNumber, find, paper_table, table_recorded
from ragrepro.report.stats_cells import fmt_fixed, markdown_table

Grid = dict[str, dict[str, Any]]


def _grid(paper: str, table: str, row_key: str, **keys: object) -> Grid:
    """{row key value: {column label: value}} of one paper table, cells filtered by keys."""
    out: Grid = {}
    for n in find(paper, table, **keys):
        out.setdefault(str(n.keys[row_key]), {})[n.column] = n.value
    return out


def _by_family(spec: dict[str, Any], paper: dict[str, Any]) -> Grid:
    """FilCo − Full by model family (Figure 4 text)."""
    grid = _grid(paper["paper"], paper["table"], paper["row_key"])
    return {spec["model_family"][m]: {c: row[c] for c in spec["paper_columns"]}
            for m, row in grid.items()}


def _by_setting(spec: dict[str, Any], paper: dict[str, Any]) -> Grid:
    grid = _grid(paper["paper"], paper["table"], paper["row_key"], **(paper.get("keys") or {}))
    return {s: grid[s] for s in spec["values"]}


def _by_measure(spec: dict[str, Any], paper: dict[str, Any]) -> Grid:
    """family -> dataset column -> (value per pivoted measure)."""
    index = {m: i for i, m in enumerate(spec["values"])}
    out: dict[str, dict[str, list[Any]]] = {}
    for n in paper_table(paper["paper"], paper["table"]):
        fam = spec["model_family"][n.keys[paper["row_key"]]]
        cell = out.setdefault(fam, {}).setdefault(n.column, [None] * len(index))
        cell[index[n.keys[spec["pivot"]]]] = n.value
    return {fam: {c: tuple(v) for c, v in cols.items()} for fam, cols in out.items()}


def _by_top_k(_spec: dict[str, Any], paper: dict[str, Any]) -> Grid:
    """measure -> dataset column -> (top-1, top-5)."""
    out: dict[str, dict[str, dict[int, Any]]] = {}
    for n in paper_table(paper["paper"], paper["table"]):
        col = n.column.split(" top-")[0]
        out.setdefault(n.keys["measure"], {}).setdefault(col, {})[int(n.keys["top_k"])] = n.value
    return {m: {c: (v[1], v[5]) for c, v in cols.items()} for m, cols in out.items()}


_GRIDS = {"delta": _by_family, "settings": _by_setting, "measures": _by_measure,
          "topk": _by_top_k}


def paper_grid(spec: dict[str, Any]) -> Grid | None:
    """The grid the spec's `paper.grid` names; None for a table with paper text only."""
    paper = spec.get("paper") or {}
    return _GRIDS[paper["grid"]](spec, paper) if paper.get("grid") else None


def paper_block(title: str, table: Grid, cols: Sequence[str]) -> str:
    rows = [[name] + [" / ".join(fmt_fixed(v) for v in vals[c]) if isinstance(vals[c], tuple)
                      else fmt_fixed(vals[c]) for c in cols] for name, vals in table.items()]
    return f"**{title}**\n\n" + markdown_table(["", *cols], rows)


def paper_markdown(spec: dict[str, Any], grid: Grid | None) -> str:
    paper = spec.get("paper") or {}
    if grid is None:
        return str(paper.get("text", ""))
    return paper_block(paper["block"], grid, spec["paper_columns"])


# ------------------------------------------------------------------------- verdicts
Interval = tuple[float | None, float | None]


def verdict_cells(spec: dict[str, Any]) -> list[PaperNumber]:
    """The paper cells a verdict can be given against: the grid's (its `keys`, e.g. top-5
    only: the numbers printed beside our rows) whose record says what they were measured
    under. Empty: the table gets no verdict column."""
    paper = spec.get("paper") or {}
    if not paper.get("grid"):
        return []
    return [c for c in find(paper["paper"], paper["table"], **(paper.get("keys") or {}))
            if c.recorded]


def pivot_verdict(spec: dict[str, Any], cells: Sequence[PaperNumber],
                  settings: Mapping[str, Mapping[str, Any]],
                  intervals: Mapping[str, Interval]) -> str:
    """One row's verdict cell. settings / intervals: per pivoted value (full, psg, ...) its
    run's recorded settings and our 95% CI; for a `delta` grid, the single key "delta" with
    the plus run's settings and the paired CI of plus − minus. Each value is matched to its
    nearest paper cell; all not comparable -> one "not comparable" naming the settings."""
    paper = spec["paper"]
    shared = table_recorded(paper["paper"], paper["table"])
    got = {k: repro.row_verdict(cells, shared, s, _const(intervals.get(k, (None, None))))
           for k, s in settings.items()}
    if not got:
        return ""
    if all(v.status == repro.NOT_COMPARABLE and v.differences for v in got.values()):
        merged: dict[str, repro.Difference] = {}
        for v in got.values():
            for d in v.differences:
                merged.setdefault(d.key, d)
        return repro.not_comparable(list(merged.values())).text
    texts = {k: v.text for k, v in got.items()}
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return "; ".join(f"{k}: {t}" for k, t in texts.items())


def _const(iv: Interval) -> Callable[[str | None], Interval]:
    return lambda _metric: iv


def verdict_line(cells: Sequence[PaperNumber]) -> str:
    return repro.margin_line([str(c.setting.get("metric")) for c in cells])
