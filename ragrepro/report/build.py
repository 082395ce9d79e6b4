"""`ragrepro report` (`make report`): every paper table (Markdown + HTML + JSON), every
sweep plot (PNG + SVG + JSON), results/index.html, and the W&B offline-sync command."""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from ..paths import results_dir
from .dashboard import write_dashboard
from .plots import PlotData, plot_data, render
from .runs import RunRecord, load_runs
from .spec import load_metric_infos, load_plot_specs, load_table_specs
from .tables import BuiltTable, build_spec
from .wandb_sync import OfflineRun, log_tables, offline_runs, sync_command

log = logging.getLogger(__name__)


@dataclass
class Report:
    runs: list[RunRecord]
    tables: list[BuiltTable]
    plots: list[tuple[PlotData, dict[str, Path]]]
    offline: list[OfflineRun]
    sync: str | None
    index: Path


def build_report(root: Path, spec_dir: Path | None = None) -> Report:
    """spec_dir: a `report/` folder instead of the config search path's (tests)."""
    root = Path(root)
    runs = load_runs(root)
    infos = load_metric_infos()
    out = root / "report"
    tables = [build_spec(spec, runs, infos, out) for spec in load_table_specs(spec_dir)]
    plots = []
    for spec in load_plot_specs(spec_dir):
        data = plot_data(spec, runs, infos)
        plots.append((data, render(data, out / "plots", spec.get("xscale"))))
    offline = offline_runs(runs)
    sync = sync_command(offline)
    index = write_dashboard(root, runs, tables, plots, offline, sync)
    return Report(runs, tables, plots, offline, sync, index)


def summary(report: Report) -> str:
    """What a person reads after `make report`."""
    lines = [(f"Read {len(report.runs)} run(s); wrote {len(report.tables)} table(s) and "
             f"{len(report.plots)} plot(s) under {report.index.parent / 'report'}.")]
    for t in report.tables:
        counts: dict[str, int] = {}
        for r in t.rows:
            counts[r.status] = counts.get(r.status, 0) + 1
        lines.append(f"  {t.name}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    lines.append(f"Dashboard: {report.index} (open it in a browser; no server needed)")
    if report.offline:
        lines.append(f"{len(report.offline)} run(s) are on W&B offline only:")
        lines += [f"  {o.experiment}/{o.run_id}" + ("" if o.run_dirs else
                                                     " (no offline-run folder found)")
                  for o in report.offline]
        if report.sync:
            lines.append("Upload them with:")
            lines.append(f"  {report.sync}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ragrepro report", description=__doc__)
    parser.add_argument("--results", type=Path, default=None, help="results folder")
    parser.add_argument("--wandb", choices=("disabled", "offline", "online"),
                        default="disabled", help="also log every table as a wandb.Table to "
                        "a W&B run in group 'report' (default: disabled)")
    parser.add_argument("--wandb-project", default="ragrepro")
    args = parser.parse_args(argv)
    report = build_report(args.results or results_dir())
    sys.stdout.write(summary(report))
    if args.wandb != "disabled":
        url = log_tables(report.tables, args.wandb, report.index.parent / "report",
                         project=args.wandb_project)
        sys.stdout.write(f"Logged {len(report.tables)} table(s) to W&B "
                         f"({url or 'offline: sync the run under results/report/wandb/'}).\n")
