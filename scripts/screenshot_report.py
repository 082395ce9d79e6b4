"""The README screenshot of the dashboard, from real runs: build the report of a results
folder (default: results/, e.g. after `make reproduce-table1`), open its index.html in
headless Chromium, tick the first two runs of the first experiment to compare them, and
save results/report/screenshot.png.

    .venv/bin/python -m scripts.screenshot_report [--results DIR] [--out PATH]

Refuses a results folder without runs or with demo runs (tests/report/demo.py): the
README must never show made-up numbers.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from ragrepro.errors import ConfigError
from ragrepro.paths import REPO_ROOT, results_dir
from ragrepro.report.browser import Chromium
from ragrepro.report.build import build_report
from ragrepro.report.grid import is_demo

log = logging.getLogger("screenshot_report")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=None,
                        help="results folder with real runs (default: results/)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "results" / "report" / "screenshot.png")
    parser.add_argument("--height", type=int, default=2150,
                        help="viewport height: the default shows the runs, a comparison and "
                        "the RALM Table 1 grid")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    report = build_report(args.results or results_dir())
    if not report.runs:
        raise ConfigError(f"No runs under {args.results or results_dir()}: run "
                          f"`make reproduce-table1` first.")
    if is_demo(report.runs):
        raise ConfigError("The results folder holds demo runs (made-up numbers); take the "
                          "screenshot from real runs only.")
    first = [r.run_id for r in report.runs if r.experiment == report.runs[0].experiment][:2]
    with Chromium(width=1400, height=args.height) as b:
        b.open(report.index)
        for run_id in first:
            b.eval(f"document.querySelector('tr[data-run-id=\"{run_id}\"] input.sel').click()")
        b.eval("window.scrollTo(0, 0)")
        b.screenshot(args.out)
    log.info("Wrote %s from %d real run(s)", args.out, len(report.runs))


if __name__ == "__main__":
    main()
