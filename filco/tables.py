"""Result tables for the FilCo experiments, with the paper's numbers beside ours, and the
`filco.tables` results-table layout (rows of settings x a pivoted column; filco.pivot).

    ragrepro table filco/fig4 [filco/table2 ...] [--paper-scale]
    python -m filco.tables fig4 [table2 table3 table4 table5 fig6 | all] [--paper-scale]

Reads the runs of results/filco/<exp>.csv (through ragrepro.report.runs) and writes
results/filco/<exp>_table.md and <exp>_table.csv; each table is the `results:` part of one
YAML, filco/conf/report/tables/filco/<exp>.yaml (dataset columns, model families, setting order,
notes, where the paper's numbers sit)."""
from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragrepro.errors import ConfigError, DataError
from ragrepro.paths import results_dir
from ragrepro.report.result_specs import load_result_spec, result_spec_names
from ragrepro.report.samples import StatsSettings

from . import pivot

log = logging.getLogger(__name__)

SPEC_DIR = Path(__file__).parent / "conf" / "report"  # its report specs
# FilCo's tables are shipped in its own conf folder (no search-path lookup at import time)
TABLES = [n.split("/", 1)[1] for n in result_spec_names(SPEC_DIR) if n.startswith("filco/")]
# The spec fields the layout reads (ragrepro.report.result_specs refuses any other).
FIELDS = frozenset({"title", "kind", "value", "pivot", "values", "labels", "task_columns",
                    "model_family", "paper_columns", "metric_note", "notes", "paper", "cells",
                    "delta_label", "reduction", "label", "rows", "row_labels", "cell",
                    "model_column", "dataset_column", "delta", "diagnostics"})


def write_layout(spec: dict[str, Any], root: Path, _experiment: str, _st: StatsSettings,
                 paper_scale: bool) -> list[Path]:
    """The layout entry point (ragrepro.report.results_tables): results/filco/ or, at paper
    scale, results/filco/paper/."""
    md = pivot.write(spec, root, "filco/paper" if paper_scale else "filco")
    return [md, md.with_suffix(".csv")]


def build(exp: str, root: Path | None = None, prefix: str = "filco") -> Path:
    """<root>/<prefix>/<exp>_table.md (and .csv); prefix filco/paper for paper scale."""
    if exp not in TABLES:
        raise ConfigError(f"Unknown FilCo table {exp!r}; use {', '.join(TABLES)}.")
    out = pivot.write(load_result_spec(f"filco/{exp}"), root or results_dir(), prefix)
    log.info("Wrote %s", out)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = list(sys.argv[1:] if argv is None else argv)
    prefix = "filco/paper" if "--paper-scale" in args else "filco"
    names = [a for a in args if not a.startswith("--")] or ["all"]
    if names == ["all"]:
        names = ["table2", "fig4", "table3", "table4", "table5", "fig6"]
    for n in names:
        try:
            build(n, prefix=prefix)
        except (DataError, ConfigError) as e:
            log.warning("%s", e)


if __name__ == "__main__":
    main()
