"""Write the RICHES result tables: python -m scripts.riches_tables [keys beam interleave main]."""
from __future__ import annotations

import logging
import sys

from ragrepro.paths import results_dir
from riches.tables import TABLES, write_table

log = logging.getLogger("riches_tables")


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for table in argv or sorted(TABLES):
        try:
            md, csv_path = write_table(table, results_dir())
        except Exception as e:  # noqa: BLE001 - report and go on with the other tables
            log.warning("%s: %s", table, e)
            continue
        log.info("%s -> %s, %s", table, md, csv_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
