"""Build In-Context RALM Table 1 from finished runs: `python -m ralm.table1 [experiment]`.

A thin call of the core results-table builder (ragrepro.report.results_tables) with the
spec conf/report/results/ralm/table1.yaml, which holds the row order, labels, model sizes
and the paper's grid. One row per run: runs that differ in any recorded setting are
different rows, and the settings that tell rows of one (model, rerank) apart are shown as
columns; two runs with identical settings are refused. Writes results/<experiment>_summary.csv
and results/<experiment>.md (results/<experiment>.csv stays the runner's one-row-per-run file).
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ragrepro.errors import DataError
from ragrepro.report import results_tables
from ragrepro.report.samples import DEFAULT_STATS, StatsSettings

SPEC = "ralm/table1"


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
