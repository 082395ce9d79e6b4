"""The paper's grids beside a `pivot` results table (FilCo): the numbers live once, in
ragrepro/report/paper_numbers.yaml; these functions reshape them as the spec's `paper` node
says ({row: {column: value}}, or tuples per column) and print the paper's own block."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .paper import find, paper_table
from .stats_cells import fmt_fixed, markdown_table

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
