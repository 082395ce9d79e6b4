"""RICHES result tables (results/riches/<table>_table.{md,csv}), built by the core `runs`
layout (ragrepro.report.run_rows) from the `results:` part of
riches/conf/report/tables/riches/<table>.yaml (`ragrepro table riches/<table>`). This module keeps
the RICHES-specific row hook and the names the scripts and tests use."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.report import run_rows
from ragrepro.report.result_specs import load_result_spec, result_spec_names
from ragrepro.report.samples import read_records

to_markdown = run_rows.to_markdown
SPEC_DIR = Path(__file__).parent / "conf" / "report"  # this package's report specs
# table -> its spec (the `by` columns, metrics, reference...), from
# riches/conf/report/tables/riches/ (no search-path lookup at import time)
TABLES: dict[str, dict[str, Any]] = {
    n.split("/", 1)[1]: load_result_spec(n, SPEC_DIR)
    for n in result_spec_names(SPEC_DIR) if n.startswith("riches/")}


def build_table(rows: Sequence[dict[str, str]], spec: dict[str, Any] | Sequence[str],
                run_dir: Callable[[dict[str, str]], Path | None] = run_rows._no_dir,
                ) -> tuple[list[str], list[list[str]]]:
    """Header and body of a table; `spec` is one of TABLES or just its `by` columns (then the
    shared RICHES metrics and columns apply)."""
    if not isinstance(spec, dict):
        spec = {**TABLES["keys"], "by": list(spec)}
    return run_rows.table_rows(rows, spec, run_dir)


def fill_soft_score(row: dict[str, str], runs: Path) -> dict[str, str]:
    """Add the mean NLI score (RICHES app. 10.2) from the run's autoais.jsonl when the row
    predates that column."""
    key = "autoais_substitute" if row.get("autoais_substitute") not in (None, "") else "autoais"
    col = f"{key}_mean_score"
    path = runs / str(row.get("run_id")) / "autoais.jsonl"
    if row.get(col) in (None, "") and path.exists():
        scores = [r.get("nli_score") or 0.0 for r in read_records(path)]  # damage: named
        row[col] = str(sum(scores) / len(scores)) if scores else ""
    return row


def fill_answered(row: dict[str, str], runs: Path) -> dict[str, str]:
    """`answered`: the share of questions with a non-empty predicted answer, from the run's
    samples. A decoder that never reaches its answer slot (e.g. hallucinated evidence running
    to the token limit) scores 0 F1 for its format, not its knowledge; this column shows it."""
    if row.get("answered") in (None, ""):
        records = read_records(runs / str(row.get("run_id")) / "samples.jsonl")
        if records:
            preds = [str(r.get("prediction") or "").strip() for r in records]
            row["answered"] = str(sum(map(bool, preds)) / len(preds))
    return row


def fill_row(row: dict[str, str], runs: Path) -> dict[str, str]:
    """The RICHES row hook: the soft AutoAIS score, the share of questions answered, and the
    judge-accuracy label of an llm-judge row that predates it (docs/autoais.md)."""
    if str(row.get("autoais_scorer", "")).startswith("llm-judge") \
            and not row.get("autoais_judge_accuracy"):
        row["autoais_judge_accuracy"] = "not recorded (an older row)"
    return fill_answered(fill_soft_score(row, runs), runs)


def write_table(table: str, results: Path) -> tuple[Path, Path]:
    if table not in TABLES:
        raise DataError(f"unknown RICHES table {table!r}; use one of {sorted(TABLES)}.")
    return run_rows.write(TABLES[table], results)
