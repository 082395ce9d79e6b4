"""In-Context RALM Table 1 from finished runs, and the `ralm.table1` results-table layout.

    ragrepro table ralm/table1 [--experiment ralm/table1_ladder]
    python -m ralm.table1 [experiment]          # the same results table (an alias)

The spec ralm/conf/report/tables/ralm/table1.yaml (its `results:` part, `layout: ralm.table1`)
holds the row order, labels, model sizes and the paper's grid; the rows are built by
ralm.gain_rows and rendered by ralm.gain_render. One row per run: runs that differ in any recorded setting are
different rows, and the settings that tell rows of one (model, rerank) apart are shown as
columns; two runs with identical settings are refused. Writes results/<experiment>_summary.csv
and results/<experiment>.md (results/<experiment>.csv stays the runner's one-row-per-run file).
"""
from __future__ import annotations

import argparse
import csv
import logging
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text, write_rows_csv
from ragrepro.report import results_tables
from ragrepro.report.samples import DEFAULT_STATS, StatsSettings

from . import gain_render, gain_rows

log = logging.getLogger(__name__)

SPEC = "ralm/table1"
# The spec fields the layout reads (ragrepro.report.result_specs refuses any other).
FIELDS = frozenset({"title", "intro", "experiments", "row_key", "reference", "order", "labels",
                    "default_retrieval", "fixed_retrieval", "upper_bounds", "model_size",
                    "retrieval_only", "rerank_only", "per_model", "scorer_line", "paper"})


def write_layout(spec: dict[str, Any], root: Path, experiment: str, st: StatsSettings,
                 _paper_scale: bool) -> list[Path]:
    """The layout entry point (ragrepro.report.results_tables)."""
    return list(build_gain(spec, experiment, root, st))


def build_gain(spec: dict[str, Any], experiment: str, root: Path,
               st: StatsSettings = DEFAULT_STATS) -> tuple[Path, Path]:
    """results/<experiment>_summary.csv and .md from the experiment's finished runs."""
    runs = gain_rows.finished_runs(root, experiment)
    if not runs:
        raise DataError(f"No finished runs under {root / experiment}: run "
                        f"`ragrepro -m experiment={experiment}` first.")
    rows = gain_rows.rows_of(runs, spec, st)
    csv_path = root / f"{experiment}_summary.csv"
    md_path = root / f"{experiment}.md"
    write_rows_csv(csv_path, rows)
    atomic_write_text(md_path, gain_render.to_markdown(rows, spec, experiment, st))
    log.info("Wrote %s and %s", csv_path, md_path)
    return csv_path, md_path


# Typed columns of a gain summary CSV (everything else is a setting, kept as text).
_FLOATS = ("ppl_word", "ppl_word_ci_low", "ppl_word_ci_high", "ppl_token", "ppl_token_ci_low",
           "ppl_token_ci_high", "gain_vs_no_retrieval_pct", "gain_ci_low", "gain_ci_high",
           "gain_p")


def _typed(column: str, text: str) -> Any:
    if text == "":
        return None
    if column in _FLOATS:
        return float(text)
    if column == "gain_includes_zero":
        return text == "True"
    return text


def read_gain_summary(path: Path) -> list[dict[str, Any]]:
    """Rows of a written summary CSV, typed as gain_rows.rows_of returns them. The runner
    records settings in sorted order, so the setting columns are put back in that order
    (the CSV header appends a setting first seen in a later row at the end)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            raw = list(csv.DictReader(f))
        typed = [{k: _typed(k, v) for k, v in r.items()} for r in raw]
    except (UnicodeDecodeError, csv.Error, ValueError) as e:
        raise DataError(f"{path} is damaged ({type(e).__name__}: {e}). It is generated from "
                        f"the run folders: rebuild it with `python -m ralm.table1 "
                        f"<experiment>` (or delete it).") from e
    out = []
    for row in typed:
        outputs = {k: v for k, v in row.items() if k in gain_render.OUTPUT_COLUMNS}
        settings = {k: row[k] for k in sorted(row) if k not in gain_render.OUTPUT_COLUMNS}
        out.append({**outputs, **settings})
    return out


def render_gain_summary(spec: dict[str, Any], experiment: str, path: Path) -> str:
    """The Markdown table from a summary CSV alone (no run folders needed)."""
    rows = read_gain_summary(path)
    first = rows[0]
    st = StatsSettings(int(first["stats_resamples"]), int(first["stats_seed"]),
                       block_tokens=int(first["stats_block_tokens"]))
    return gain_render.to_markdown(rows, spec, experiment, st)



def build(name: str = "ralm/table1", root: Path | None = None,
          st: StatsSettings = DEFAULT_STATS) -> tuple[Path, Path]:
    """(summary CSV, Markdown) of experiment `name`'s Table 1."""
    csv_path, md_path = results_tables.build(SPEC, root, experiment=name, st=st)
    return csv_path, md_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", default="ralm/table1", help="the experiment")
    ap.add_argument("--resamples", type=int, default=StatsSettings.resamples)
    ap.add_argument("--seed", type=int, default=StatsSettings.seed,
                    help="seed of the bootstrap and permutation resamples")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        _csv, md = build(args.name, st=StatsSettings(args.resamples, args.seed))
    except DataError as e:  # no finished runs yet: say what to run, no traceback
        raise SystemExit(str(e)) from None
    logging.getLogger(__name__).info("\n%s", md.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
