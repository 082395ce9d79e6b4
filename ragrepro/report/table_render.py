"""Rendering of the config-driven paper tables: the row model (TableRow), Markdown and HTML
(every number with its 95% CI and n, gains with their paired CI, p-value and ≈0 mark). The
Markdown is readable tables of at most ten columns; the HTML is one wide sortable table."""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from .readable import check_columns, split_columns
from .runs import is_missing
from .table_stats import RowStats, fmt_ci, fmt_test

NOT_RUN = "not run"


@dataclass
class TableRow:
    cell: str                         # the paper's "row · column", or "(no paper cell)"
    status: str                       # ok | not run | no paper number | incomplete | missing metric
    keys: dict[str, Any]
    ours: float | None = None
    paper: float | None = None
    diff: float | None = None         # ours - paper, in the paper's unit
    ours_gain: float | None = None    # (ours - ours baseline) / ours baseline
    paper_gain: float | None = None
    metric: str | None = None         # our metric column
    paper_metric: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    run_id: str | None = None
    experiment: str | None = None
    source: str | None = None
    pair: dict[str, str] = field(default_factory=dict)   # pair_on values, for grouping
    label: str = ""                   # settings telling this run from others in its cell
    paper_row: str = ""               # the paper's row and column labels, for the grid view
    paper_column: str = ""
    stats: RowStats = field(default_factory=RowStats)    # n, CI, paired test (table unit)
    verdict: str = ""                 # reproduced / differs / ... (ragrepro.report.verdict)
    flags: str | None = None          # ragrepro.report.flags; None: the run has no diagnostics


# ------------------------------------------------------------------------- rendering
def _fmt(value: float | None, digits: int = 2, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _fmt_gain(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}%"


def _ours_text(row: TableRow) -> str:
    if row.status == NOT_RUN:
        return NOT_RUN
    if row.ours is None:
        return row.status
    return fmt_ci(row.ours, row.stats.ci_low, row.stats.ci_high)


def _ours_gain_text(row: TableRow) -> str:
    if row.ours_gain is None:
        return "–"
    return _fmt_gain(row.ours_gain) + fmt_test(row.stats, percent=True)


def _n_text(row: TableRow) -> str:
    return "" if row.stats.n is None else str(row.stats.n)


def with_flags(rows: list[TableRow]) -> bool:
    """A table gets a Flags column only when some row has diagnostics to judge (tables of
    runs made before the diagnostics existed stay as they were)."""
    return any(r.flags is not None for r in rows)


def render_cells(row: TableRow, show: list[str], flags: bool = False) -> list[str]:
    run = f"{row.experiment}/{row.run_id}" if row.run_id else ""
    return [row.cell, _ours_text(row), _n_text(row), *([row.flags or ""] if flags else []),
            _fmt(row.paper, 1),
            _fmt(row.diff, 2, signed=True), row.verdict, _ours_gain_text(row),
            _fmt_gain(row.paper_gain),
            row.metric or "", row.paper_metric or "",
            *["" if is_missing(row.settings.get(c)) else str(row.settings.get(c))
              for c in show], row.note, run]


def header(show: list[str], flags: bool = False) -> list[str]:
    return ["Paper cell", "Ours [95% CI]", "n", *(["Flags"] if flags else []), "Paper",
            "Ours − paper", "Verdict vs paper",
            "Gain vs baseline (ours) [95% CI] p", "Gain vs baseline (paper)", "Our metric",
            "Paper metric", *show, "Comparability", "Run"]


def _describe(spec: dict[str, Any], caption: str, n_runs: int) -> list[str]:
    lines = [(f"Experiments: {', '.join(spec.get('experiments') or []) or '(none)'}; "
             f"{n_runs} run(s) read.")]
    if caption:
        lines.append(f"Paper: {caption}")
    if spec.get("baseline"):
        ppl = "ppl" in str(spec.get("metric"))
        lines.append(f"Gains are relative to the baseline cell {spec['baseline']} with the same "
                     f"{', '.join(spec.get('pair_on') or [])}"
                     f"{' (perplexity: a negative gain is an improvement)' if ppl else ''}. "
                     "At mini scale only the direction of a gain is comparable with the paper.")
    if spec.get("notes"):
        lines.append(str(spec["notes"]).strip())
    return lines


# The Markdown shows the wide row of `header` as readable tables of at most ten columns
# (ragrepro.report.readable): the numbers, then what was compared, then the settings shown;
# each starts with the paper cell and our run, so its rows read on their own. The HTML and the
# JSON keep the one wide row.
NUMBERS = ("Paper cell", "Ours [95% CI]", "n", "Flags", "Paper", "Ours − paper",
           "Verdict vs paper", "Gain vs baseline (ours) [95% CI] p", "Gain vs baseline (paper)",
           "Run")
COMPARED = ("Paper cell", "Run", "Our metric", "Paper metric", "Comparability")
ROW_KEY = ("Paper cell", "Run")


def markdown_parts(rows: list[TableRow], show: list[str]) -> list[tuple[list[str], list[list[str]]]]:
    """(header, body) of each Markdown table: the columns of `header` in three groups, the
    shown settings split so that every table keeps to ten columns."""
    flags = with_flags(rows)
    head = header(show, flags)
    cells = [dict(zip(head, render_cells(row, show, flags))) for row in rows]

    def part(cols: list[str]) -> tuple[list[str], list[list[str]]]:
        return cols, [[c[k] for k in cols] for c in cells]

    parts = [part([h for h in NUMBERS if h in head]), part(list(COMPARED))]
    if show:
        key = list(ROW_KEY)
        parts += split_columns(key + list(show), [[c[k] for k in key + list(show)]
                                                  for c in cells], len(key))
    for cols, _ in parts:
        check_columns(cols, "paper table (ragrepro.report.table_render)")
    return parts


def render_markdown(title: str, lines: list[str], rows: list[TableRow], show: list[str]) -> str:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    out = [f"# {title}", "", *[f"{ln}  " for ln in lines]]
    for head, body in markdown_parts(rows, show):
        out += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in body]
    return "\n".join(out) + "\n"


def render_html_table(rows: list[TableRow], show: list[str], table_id: str = "") -> str:
    flags = with_flags(rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header(show, flags))
    body = []
    comment = header(show, flags).index("Comparability")
    for row in rows:
        tds = "".join(f"<td class=\"comment\">{html.escape(c)}</td>" if i == comment else
                      f"<td>{html.escape(c)}</td>"
                      for i, c in enumerate(render_cells(row, show, flags)))
        body.append(f'<tr data-status="{html.escape(row.status)}">{tds}</tr>')
    attr = f' id="{html.escape(table_id)}"' if table_id else ""
    return (f'<table class="report"{attr}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def render_html(title: str, lines: list[str], rows: list[TableRow], show: list[str]) -> str:
    paras = "".join(f"<p>{html.escape(ln)}</p>" for ln in lines)
    style = ("body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
             "tr[data-status='not run']{color:#888}"
             "td.comment{min-width:28em;white-space:normal}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>{paras}"
            f"{render_html_table(rows, show)}</body></html>\n")
