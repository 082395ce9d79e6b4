"""The methods' results tables, one builder for all three papers:

    python -m ragrepro.report.results_tables ralm/table1 [--experiment ralm/table1_ladder]
    python -m ragrepro.report.results_tables riches/main filco/fig4 ...

Each table is one YAML, conf/report/results/<method>/<table>.yaml, whose `layout` picks the
builder (ragrepro.report.result_specs): `gain` (RALM Table 1: results/<exp>.md and
<exp>_summary.csv from the finished run folders), `runs` (RICHES: results/<exp>_table.md
and .csv from the runner's results/<exp>.csv) and `pivot` (FilCo, the same files). Every
number comes from the run folders' per-sample records through ragrepro.stats."""
from __future__ import annotations

import argparse
import csv
import logging
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError
from ..io import atomic_write_text, write_rows_csv
from ..paths import results_dir
from . import gain_render, gain_rows, pivot, run_rows
from .result_specs import load_result_spec, spec_for_experiment
from .samples import DEFAULT_STATS, StatsSettings

log = logging.getLogger(__name__)


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
    with open(path, newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    out = []
    for r in raw:
        row = {k: _typed(k, v) for k, v in r.items()}
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


def build(name: str, root: Path | None = None, experiment: str | None = None,
          st: StatsSettings = DEFAULT_STATS, paper_scale: bool = False) -> list[Path]:
    """Build the table `name` (a spec name or an experiment a spec lists) from the results
    under root; returns the written files. paper_scale: FilCo's results/filco/paper/."""
    root = root or results_dir()
    try:
        spec = load_result_spec(name)
    except ConfigError:
        spec = spec_for_experiment(name)
        experiment = experiment or name
    experiment = experiment or name
    if spec["layout"] == "gain":
        return list(build_gain(spec, experiment, root, st))
    if spec["layout"] == "runs":
        return list(run_rows.write(spec, root))
    method = spec["name"].split("/")[0]
    md = pivot.write(spec, root, f"{method}/paper" if paper_scale else method)
    return [md, md.with_suffix(".csv")]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="ragrepro table --method",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+", help="table (ralm/table1) or experiment name")
    ap.add_argument("--experiment", default=None,
                    help="the experiment whose runs fill the table (default: its name)")
    ap.add_argument("--results", type=Path, default=None, help="results folder")
    ap.add_argument("--paper-scale", action="store_true",
                    help="FilCo: the paper-scale runs under results/filco/paper/")
    ap.add_argument("--resamples", type=int, default=StatsSettings.resamples)
    ap.add_argument("--seed", type=int, default=StatsSettings.seed,
                    help="seed of the bootstrap and permutation resamples")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    st = StatsSettings(args.resamples, args.seed)
    for name in args.names:
        try:
            paths = build(name, args.results, args.experiment, st, args.paper_scale)
        except DataError as e:  # e.g. no runs yet: say what to run, no traceback
            raise SystemExit(str(e)) from None
        for path in paths:
            if path.suffix == ".md":
                log.info("\n%s", path.read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
