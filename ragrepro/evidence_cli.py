"""`ragrepro evidence`: pack and unpack the runs behind a committed table, and say what backs
each committed table.

    ragrepro evidence pack ralm/table1      # results/evidence/ralm/table1.jsonl.gz
    ragrepro evidence unpack ralm/table1 --results-dir DIR
    ragrepro evidence status [--write]      # what backs each committed table (manifest.yaml)

The command line sits above both modules it drives: ragrepro.evidence (the bundles) and
ragrepro.evidence_manifest (which reads bundles through ragrepro.evidence).
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from . import evidence, evidence_manifest
from .errors import RagreproError
from .paths import results_dir

log = logging.getLogger(__name__)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ragrepro evidence",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("pack", "unpack", "status"))
    ap.add_argument("experiments", nargs="*", help="e.g. ralm/table1 (pack, unpack)")
    ap.add_argument("--results-dir", type=Path, default=None,
                    help="where the runs are (pack) or go (unpack); default results/")
    ap.add_argument("--bundles", type=Path, default=None,
                    help="the bundles' root (default: results/ of this checkout)")
    ap.add_argument("--write", action="store_true",
                    help="status: also write results/evidence/status.md")
    args = ap.parse_args(list(argv) if argv is not None else None)
    root = args.results_dir or results_dir()
    bundles = args.bundles or results_dir()
    if args.action == "status":
        return evidence_manifest.status(bundles, args.write)
    if not args.experiments:
        ap.error(f"{args.action} needs at least one experiment (e.g. ralm/table1)")
    try:
        for experiment in args.experiments:
            if args.action == "pack":
                evidence.pack(root, experiment, evidence.bundle_path(bundles, experiment))
            else:
                dirs = evidence.unpack(evidence.bundle_path(bundles, experiment), root)
                log.info("Unpacked %d runs of %s under %s", len(dirs), experiment, root)
    except RagreproError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
