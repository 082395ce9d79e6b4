"""A paper table in the paper's shape for the dashboard: the paper's rows and columns, and in
each cell our number with its 95% CI (and the paired gain over the baseline, marked ≈0 when
its CI includes zero) above the paper's number. Paper rows where we have no run are folded
away (one click opens them); our runs that match no paper cell are listed below the grid."""
from __future__ import annotations

import html
from typing import Any

from .table_render import NOT_RUN, TableRow
from .table_stats import fmt_ci, zero_mark


def _order(values: list[str]) -> list[str]:
    out: list[str] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _gain_line(r: TableRow) -> str:
    if r.ours_gain is None:
        return ""
    s = r.stats
    ci = (f" [{100 * s.test_low:+.1f}, {100 * s.test_high:+.1f}]"
          if s.test_low is not None and s.test_high is not None else " [no CI]")
    # relative change, as the paper tables print it (perplexity: negative = better)
    return (f'<div class="gain">vs baseline {100 * r.ours_gain:+.1f}%{ci}'
            f"{html.escape(zero_mark(s.includes_zero, s.p_value))}</div>")


def _ours_block(r: TableRow, label: str = "") -> str:
    if r.ours is None:
        return f'<div class="ours missing">{html.escape(label + r.status)}</div>'
    title = "; ".join([f"{r.experiment}/{r.run_id}", r.note])
    n = f" n={r.stats.n}" if r.stats.n is not None else ""
    tag = f'<span class="label">{html.escape(label)}</span>' if label else ""
    return (f'<div class="ours" title="{html.escape(title)}">{tag}<b>'
            f"{html.escape(fmt_ci(r.ours, r.stats.ci_low, r.stats.ci_high))}</b>"
            f'<span class="n">{html.escape(n)}</span></div>{_gain_line(r)}'
            + (f'<div class="flags">flags: {html.escape(r.flags)}</div>' if r.flags else ""))


def labels(rows: list[TableRow]) -> list[str]:
    """Per run of one cell, what tells it from the others ('' if alone): the shown settings
    that differ (compact), else the builder's label over every recorded setting."""
    if len(rows) < 2:
        return [""] * len(rows)
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r.settings if k not in keys]
    differ = [k for k in keys if len({str(r.settings.get(k)) for r in rows}) > 1]
    if differ:
        return [", ".join(f"{r.settings.get(k)}" for k in differ) + ": " for r in rows]
    return [f"{r.label or 'run ' + str(r.run_id)}: " for r in rows]


def grid_cell(rows: list[TableRow]) -> str:
    """One paper cell: each of our runs in it (labelled by the settings that differ between
    them), then the paper's number."""
    ours = [r for r in rows if r.status != NOT_RUN]
    paper = next((r.paper for r in rows if r.paper is not None), None)
    parts = ([_ours_block(r, lab) for r, lab in zip(ours, labels(ours))]
             or ['<div class="ours none">not run</div>'])
    parts.append(f'<div class="paper">paper {"–" if paper is None else f"{paper:g}"}</div>')
    status = "ok" if ours else NOT_RUN
    return f'<td data-status="{status}">{"".join(parts)}</td>'


def _grid_table(row_names: list[str], cols: list[str],
                cells: dict[tuple[str, str], list[TableRow]], table_id: str) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for name in row_names:
        tds = "".join(grid_cell(cells.get((name, c), [])) for c in cols)
        body.append(f'<tr data-paper-row="{html.escape(name)}"><th class="rowhead">'
                    f"{html.escape(name)}</th>{tds}</tr>")
    attr = f' id="{html.escape(table_id)}"' if table_id else ""
    return (f'<table class="grid"{attr}><thead><tr><th></th>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _unmatched(rows: list[TableRow]) -> str:
    extra = [r for r in rows if not r.paper_row]
    if not extra:
        return ""
    items = "".join(f"<li>{_ours_block(r)} <span class='note'>{html.escape(r.note)}</span></li>"
                    for r in extra)
    return (f'<details class="unmatched"><summary>{len(extra)} of our runs match no paper '
            f"cell</summary><ul>{items}</ul></details>")


def grid_html(rows: list[TableRow], table_id: str = "") -> str:
    """The paper-shaped grid; paper rows without any run of ours folded into <details>."""
    placed = [r for r in rows if r.paper_row]
    cols = _order([r.paper_column for r in placed])
    cells: dict[tuple[str, str], list[TableRow]] = {}
    for r in placed:
        cells.setdefault((r.paper_row, r.paper_column), []).append(r)
    names = _order([r.paper_row for r in placed])
    ran = [n for n in names if any(r.status != NOT_RUN for c in cols
                                   for r in cells.get((n, c), []))]
    folded = [n for n in names if n not in ran]
    out = []
    if ran:
        out.append(_grid_table(ran, cols, cells, table_id))
    else:
        out.append('<p class="hint">No run of ours fills this table yet.</p>')
    if folded:
        out.append(f'<details class="not-run-rows"><summary>{len(folded)} paper row(s) we '
                   f"have not run (paper numbers only)</summary>"
                   f"{_grid_table(folded, cols, cells, table_id + '-not-run')}</details>")
    out.append(_unmatched(rows))
    return "".join(out)


def is_demo(runs: list[Any]) -> bool:
    """True when any run was written by tests/report/demo.py (made-up numbers)."""
    return any(bool((getattr(r, "metadata", None) or {}).get("demo")) for r in runs)
