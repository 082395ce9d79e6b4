"""Write the RICHES result tables: python -m scripts.riches_tables [keys beam interleave main].

Each is `ragrepro table --method riches/<table>` (spec: the `results:` part of
riches/conf/report/tables/riches/<table>.yaml); this script builds every one it can."""
from __future__ import annotations

import logging
import sys

from ragrepro.errors import DataError
from ragrepro.paths import results_dir
from riches.tables import TABLES, write_table

log = logging.getLogger("riches_tables")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for table in argv or sorted(TABLES):
        try:
            md, csv_path = write_table(table, results_dir())
        except DataError as e:  # a table whose experiment has not run: go on with the others
            log.warning("%s: %s", table, e)
            continue
        log.info("%s -> %s, %s", table, md, csv_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
