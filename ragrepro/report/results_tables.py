"""`ragrepro table NAME ...`: the one table command, over the one spec folder.

    ragrepro table ralm/table1 [--experiment ralm/table1_ladder]   # both parts of the spec
    ragrepro table riches/main filco/fig4 [--paper-scale]
    ragrepro table --method riches/main     # only the results part (= the old entry points:
                                            # python -m ragrepro.report.results_tables,
                                            # python -m ralm.table1, python -m filco.tables)

NAME is a table spec (report/tables/<paper>/<table>.yaml on the config search path, a
plug-in method's conf folder included) or an experiment a spec lists. A spec has up to two
parts: its `results:` part is the method's own table of the experiment's runs, written next
to them, whose `layout` picks the builder (ragrepro.report.result_specs): the core's `runs`
(results/<exp>_table.md and .csv) or a method package's module (`ralm.table1`: results/<exp>.md
and <exp>_summary.csv; `filco.tables`); its top-level keys are the paper grid, written to
results/report/<paper>/<table>.{md,html,json} (ragrepro.report.tables, as `ragrepro report`
does for every spec). Every run is read through ragrepro.report.runs, every number comes
from the run folders' per-sample records through ragrepro.stats."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .. import evidence_manifest
from ..configcheck import check_overrides
from ..errors import ConfigError, DataError, did_you_mean
from ..paths import results_dir
from .result_specs import layout_module, load_result_spec, result_spec_names, spec_for_experiment
from .samples import DEFAULT_STATS, StatsSettings
from .spec import load_table_specs
from .tables import BuiltTable, build_all

log = logging.getLogger(__name__)


def build(name: str, root: Path | None = None, experiment: str | None = None,
          st: StatsSettings = DEFAULT_STATS, paper_scale: bool = False) -> list[Path]:
    """Build the table `name` (a spec name or an experiment a spec lists) from the results
    under root; returns the written files. paper_scale: the paper-scale runs under
    results/<method>/paper/ (layouts that have them)."""
    root = root or results_dir()
    try:
        spec = load_result_spec(name)
    except ConfigError:
        spec = spec_for_experiment(name)
        experiment = experiment or name
    experiment = experiment or name
    try:
        return layout_module(spec["layout"]).write_layout(spec, root, experiment, st,
                                                          paper_scale)
    except DataError as e:
        # no runs: say what the evidence manifest knows of the committed table (the
        # layouts' own messages say how to run the experiment)
        note = evidence_manifest.pending_note(root, experiment)
        if not note:
            raise
        raise DataError(f"{e}{note}") from e


def has_results_table(name: str) -> bool:
    """Whether `name` is a results spec or an experiment one lists."""
    try:
        spec_for_experiment(name)
    except ConfigError:
        return False
    return True


def _grid_names(names: list[str]) -> list[str]:
    """The names that select a paper grid (a spec's own name or one of its experiments)."""
    specs = load_table_specs()
    return [n for n in names if any(n == s["name"] or n in s["experiments"] for s in specs)]


def _build_results(name: str, args: argparse.Namespace, st: StatsSettings) -> None:
    try:
        paths = build(name, args.results, args.experiment, st, args.paper_scale)
    except DataError as e:  # e.g. no runs yet: say what to run, no traceback
        if args.method:
            raise SystemExit(str(e)) from None
        log.warning("results table %s not built: %s", name, e)
        return
    for path in paths:
        if path.suffix == ".md":
            log.info("\n%s", path.read_text(encoding="utf-8"))


def _print_grids(built: list[BuiltTable]) -> None:
    for table in built:
        sys.stdout.write(table.paths["md"].read_text(encoding="utf-8") + "\n")
        log.info("Wrote %s and %s", table.paths["md"], table.paths["html"])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ragrepro table", description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+", help="table (ralm/table1) or experiment name")
    ap.add_argument("--method", action="store_true",
                    help="only the spec's results part (the method's table of its runs)")
    ap.add_argument("--experiment", default=None,
                    help="the experiment whose runs fill the results table (default: its name)")
    ap.add_argument("--results", type=Path, default=None, help="results folder")
    ap.add_argument("--paper-scale", action="store_true",
                    help="the paper-scale runs under results/<method>/paper/")
    ap.add_argument("--resamples", type=int, default=StatsSettings.resamples)
    ap.add_argument("--seed", type=int, default=StatsSettings.seed,
                    help="seed of the bootstrap and permutation resamples")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None, results_only: bool = False) -> None:
    args = parse_args(argv)
    args.method = args.method or results_only
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    st = StatsSettings(args.resamples, args.seed)
    grids = [] if args.method else _grid_names(args.names)
    results = [n for n in args.names if args.method or has_results_table(n)]
    unknown = [n for n in args.names if n not in grids and n not in results]
    if unknown:
        known = sorted({s["name"] for s in load_table_specs()} | set(result_spec_names()))
        raise ConfigError(f"No table {unknown}: give a spec name or an experiment a spec "
                          f"lists.{did_you_mean(unknown[0], known)} Known tables: "
                          f"{', '.join(known)}.")
    # the runs of an experiment config's name (any conf folder's experiment/), checked as the run checks it; or of a results
    # experiment no config names (rescored/<experiment>, ragrepro.rescore) that has an index
    if args.experiment and not (Path(args.results or results_dir())
                                / f"{args.experiment}.csv").is_file():
        check_overrides([f"experiment={args.experiment}"])
    for name in results:
        _build_results(name, args, st)
    if grids:
        _print_grids(build_all(args.results or results_dir(), names=grids))


if __name__ == "__main__":
    main(results_only=True)
