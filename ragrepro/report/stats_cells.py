"""Cells shared by the results-table layouts: a value with its 95% CI over the run's
per-sample records, a paired difference with its CI, p-value and ≈0 mark, and the plain
Markdown / CSV writers. Numbers come from ragrepro.report.samples and ragrepro.stats."""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .samples import interval_for, paired_for, run_metrics
from .table_stats import zero_mark


def code_version(r: dict[str, Any]) -> Any:
    """The code version a run was computed with (commit, +dirty), as the runner records it."""
    meta = r.get("metadata") or {}
    return meta.get("code_version") or meta.get("git_commit")


def fmt_fixed(x: object, nd: int = 1) -> str:
    """x with nd decimals; '–' when it is not a number."""
    try:
        return f"{float(x):.{nd}f}"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "–"


def fmt_compact(v: str) -> str:
    """Integers as integers, other numbers with 3 decimals, text as it is."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return v or ""
    return f"{x:.3f}" if not x.is_integer() else str(int(x))


def ci_text(run_dir: Path | None, metric: str, text: str, nd: int, missing: str) -> str:
    """`text [low, high]`: the 95% bootstrap CI of the run's metric over its per-sample
    records; `text + missing` when the run has none."""
    iv = interval_for(run_dir, run_metrics(run_dir)[0], metric)
    return f"{text} [{iv.low:.{nd}f}, {iv.high:.{nd}f}]" if iv else f"{text}{missing}"


def paired_text(a_dir: Path | None, b_dir: Path | None, metric: str, diff: str,
                nd: int) -> str:
    """a - b on the same questions: `diff [low, high] p=.. mark`, or `diff (no CI)`."""
    test, _why = paired_for(a_dir, run_metrics(a_dir)[0], b_dir, run_metrics(b_dir)[0],
                            metric, "diff")
    if test is None:
        return f"{diff} (no CI)"
    return (f"{diff} [{test.low:+.{nd}f}, {test.high:+.{nd}f}] p={test.p_value:.2f}"
            f"{zero_mark(test.includes_zero, test.p_value)}")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()
