"""Regenerate the README screenshot of the dashboard: build the synthetic demo results
tree (ragrepro.report.demo; made-up numbers) in a temporary folder, open its index.html in
headless Chromium, tick two runs to compare, and save results/report/screenshot.png.

    .venv/bin/python -m scripts.screenshot_report [--out PATH]
"""
from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from ragrepro.paths import REPO_ROOT
from ragrepro.report.browser import Chromium
from ragrepro.report.build import build_report
from ragrepro.report.demo import build_demo

log = logging.getLogger("screenshot_report")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "results" / "report" / "screenshot.png")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with tempfile.TemporaryDirectory() as tmp:
        report = build_report(build_demo(Path(tmp) / "results"))
        with Chromium(width=1400, height=1150) as b:
            b.open(report.index)
            for run_id in ("r1base", "r1rerank"):
                b.eval(f"document.querySelector('tr[data-run-id=\"{run_id}\"] input.sel')"
                       ".click()")
            b.eval("window.scrollTo(0, 0)")
            b.screenshot(args.out)
    log.info("Wrote %s", args.out)


if __name__ == "__main__":
    main()
