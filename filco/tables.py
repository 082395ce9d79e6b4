"""Result tables for the FilCo experiments, with the paper's numbers beside ours.

    python -m filco.tables fig4 [table2 table3 table4 table5 fig6 | all] [--paper-scale]

Reads results/filco/<exp>.csv (one row per run, written by the runner) and writes
results/filco/<exp>_table.md and <exp>_table.csv through the core results-table builder
(ragrepro.report.pivot); each table is one YAML, conf/report/results/filco/<exp>.yaml
(dataset columns, model families, setting order, notes, where the paper's numbers sit)."""
from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ragrepro.errors import ConfigError, DataError
from ragrepro.paths import results_dir
from ragrepro.report import pivot
from ragrepro.report.result_specs import load_result_spec, result_spec_names

log = logging.getLogger(__name__)

TABLES = [n.split("/", 1)[1] for n in result_spec_names() if n.startswith("filco/")]


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
