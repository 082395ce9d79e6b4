"""`make rehearse`: every swept cell of every paper config (the experiment/*/paper/ folder of
conf/ and of every registered method's conf folder, the built-in methods' and plug-ins') in
rehearsal mode (stand-in models, fixture data), in this one process, then every paper table
and each rehearsed experiment's own results table from those rows. Writes
results/rehearsal/summary.csv and summary.md; exits 1 if any cell or table failed.

    python -m scripts.rehearse [--only ralm/paper/fig4 ...] [--limit 2] [--max-cells N]

`--real` (`make rehearse-real`): cells whose model family has a real embedded member run it
with uncapped budgets (rehearsal.real_models=true); a diagnostics flag fails the cell.
Writes results/rehearsal/real_summary.csv and .md instead, and builds no tables.

    python -m scripts.rehearse --real [--only riches/paper/main ...] [--cell 'dataset=nq-open']
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro.methods import conf_dirs
from ragrepro.paths import CONF_DIR, results_dir
from ragrepro.rehearsal.cells import (
    CellResult,
    RealCellResult,
    coverage_problem,
    first_line,
    flag_problem,
    merge_real,
    read_real_summary,
    sweep_cells,
    write_real_summary,
    write_summary,
)

log = logging.getLogger("rehearse")


def paper_experiments(folders: Sequence[Path] | None = None) -> list[str]:
    """Every paper-scale experiment (`<paper>/paper/<table>`) of conf/ and of each registered
    method's conf folder (its profile's `conf_dir`: a plug-in's paper configs are rehearsed
    like the core's), each name once; `folders` replaces that list of conf folders."""
    dirs = [CONF_DIR, *conf_dirs()] if folders is None else list(folders)
    return sorted({p.relative_to(d / "experiment").with_suffix("").as_posix()
                   for d in dirs for p in (d / "experiment").glob("*/paper/*.yaml")})


def run_cell(experiment: str, cell: list[str], extra: list[str]) -> CellResult:
    from ragrepro.configcheck import check_config
    from ragrepro.runner import execute
    from ragrepro.validate import check_values

    started = time.time()
    try:
        cfg = compose("config", overrides=[f"experiment={experiment}", "rehearsal=cpu",
                                           "wandb.mode=disabled", *cell, *extra])
        check_values(cfg)  # as the CLI does: types and ranges first
        check_config(cfg)
        metrics = execute(cfg)
        error = coverage_problem(cfg, metrics)
        status = "failed" if error else "ok"
    except Exception as e:  # noqa: BLE001 - every failure is a row of the summary
        log.error("FAILED %s %s\n%s", experiment, " ".join(cell), traceback.format_exc())
        status, error = "failed", first_line(e)
    return CellResult(experiment, " ".join(cell), status, time.time() - started, error)


def run_real_cell(experiment: str, cell: list[str], extra: list[str]) -> RealCellResult:
    """One cell in real mode: the family's real member where there is one, and its row's
    diagnostics read by the flag rules (conf/report/flags.yaml)."""
    from ragrepro.configcheck import check_config
    from ragrepro.rehearsal.real import choose, member_installed
    from ragrepro.runner import execute
    from ragrepro.validate import check_values

    started = time.time()
    family, used, real, flags = "", "?", False, ""
    try:
        cfg = compose("config", overrides=[f"experiment={experiment}", "rehearsal=cpu",
                                           "rehearsal.real_models=true", "wandb.mode=disabled",
                                           *cell, *extra])
        choice = choose(OmegaConf.select(cfg, "model.source", default=None), member_installed)
        family, used, real = choice.family, choice.used, choice.real
        check_values(cfg)  # as the CLI does: types and ranges first
        check_config(cfg)
        metrics = execute(cfg)
        flags, error = flag_problem(metrics, real)
        error = error or coverage_problem(cfg, metrics)
        status = "failed" if error else "ok"
    except Exception as e:  # noqa: BLE001 - every failure is a row of the summary
        log.error("FAILED %s %s\n%s", experiment, " ".join(cell), traceback.format_exc())
        status, error = "failed", first_line(e)
    return RealCellResult(experiment, " ".join(cell), family, used, status,
                          time.time() - started, flags, error, real)


def cells_of(experiment: str) -> list[list[str]]:
    cfg = compose("config", overrides=[f"experiment={experiment}"], return_hydra_config=True)
    params = OmegaConf.select(cfg, "hydra.sweeper.params", default=None)
    return sweep_cells(OmegaConf.to_container(params) if params is not None else None)


def build_tables(root: Path) -> None:
    from ragrepro.report.tables import build_all

    for built in build_all(root, title_prefix="REHEARSAL (stand-ins, not results): "):
        log.info("Rehearsal table %s -> %s", built.name, built.paths["md"])


def results_table_of(experiment: str) -> str | None:
    """The results spec (the `results:` part of a table spec) that tabulates `experiment`:
    one that lists it, else the one of its mini-scale name (<paper>/paper/<table> ->
    <paper>/<table>, whose spec a paper-scale run shares); None when no spec has one."""
    from ragrepro.errors import ConfigError
    from ragrepro.report.result_specs import spec_for_experiment

    for name in dict.fromkeys([experiment, experiment.replace("/paper/", "/", 1)]):
        try:
            return str(spec_for_experiment(name)["name"])
        except ConfigError:
            continue
    return None


def build_results_tables(root: Path, experiments: Sequence[str]) -> list[CellResult]:
    """Each rehearsed experiment's own results table (`ragrepro table <spec> --experiment
    <experiment> --paper-scale`, its method's layout), written next to its rehearsal rows;
    a table that fails is a failed row of the summary, as a failed cell is."""
    from ragrepro.report.results_tables import build

    failed = []
    for exp in experiments:
        name = results_table_of(exp)
        if name is None:
            continue
        try:
            for path in build(name, root, experiment=exp, paper_scale="/paper/" in exp):
                log.info("Rehearsal results table %s (%s) -> %s", name, exp, path)
        except Exception as e:  # noqa: BLE001 - a table failure is a failed rehearsal too
            log.error("FAILED results table %s of %s\n%s", name, exp, traceback.format_exc())
            failed.append(CellResult("tables", f"results {name} ({exp})", "failed", 0.0,
                                     first_line(e)))
    return failed


def write_plan_example(out: Path) -> None:
    """The preflight of ralm/paper/fig4 on two stated 80 GB GPUs (docs/rehearsal.md links it)."""
    from ragrepro.plan import plan_text

    text = plan_text(["experiment=ralm/paper/fig4"], True, gpu_mem=80.0, gpus=2)
    (out / "plan_ralm_paper_fig4.md").write_text(
        "# `ragrepro plan -m experiment=ralm/paper/fig4 --gpu-mem 80 --gpus 2`\n\n"
        + text + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rehearse", description=__doc__)
    ap.add_argument("--only", nargs="*", default=None, help="experiments (default: all paper)")
    ap.add_argument("--limit", type=int, default=2)
    ap.add_argument("--max-cells", type=int, default=None, help="per experiment (debugging)")
    ap.add_argument("--cell", default=None,
                    help="only cells whose overrides match this regex (e.g. 'dataset=nq-open')")
    ap.add_argument("--real", action="store_true",
                    help="real embedded models where the family has one (rehearsal.real_models)")
    ap.add_argument("--append", action="store_true",
                    help="--real: merge into the existing real_summary (same cell: replaced)")
    args = ap.parse_args(argv)
    if args.real:
        return main_real(args)
    out = results_dir() / "rehearsal"
    t0 = time.time()
    results: list[CellResult] = run_selected(
        args, run_cell, lambda r: f"{r.status:<6} {r.seconds:5.1f}s {r.experiment} {r.cell} "
                                  f"{r.error}")
    try:
        build_tables(out)
    except Exception as e:  # noqa: BLE001 - a table failure is a failed rehearsal too
        results.append(CellResult("tables", "build_all", "failed", 0.0, first_line(e)))
    # experiments with a finished cell: one whose every cell failed has no rows to tabulate
    done = list(dict.fromkeys(r.experiment for r in results if r.status == "ok"
                              and r.experiment != "tables"))
    results += build_results_tables(out, done)
    write_summary(results, out, time.time() - t0)
    if not args.only:
        write_plan_example(out)
    failed = sum(r.status != "ok" for r in results)
    log.info("%d of %d cells ok; %s", len(results) - failed, len(results), out / "summary.md")
    return 1 if failed else 0


def run_selected(args: argparse.Namespace, run: Callable[[str, list[str], list[str]], Any],
                 describe: Callable[[Any], str]) -> list[Any]:
    """Every selected cell of every selected experiment through `run`, logged as it ends."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    log.setLevel(logging.INFO)
    extra = [f"limit={args.limit}", "overwrite=true"]
    results = []
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for exp in args.only or paper_experiments():
            for cell in selected_cells(exp, args.cell, args.max_cells):
                results.append(run(exp, cell, extra))
                log.info("%s", describe(results[-1]))
    return results


def selected_cells(experiment: str, pattern: str | None,
                   max_cells: int | None) -> list[list[str]]:
    """The experiment's cells whose override string matches `pattern`, at most `max_cells`."""
    cells = [c for c in cells_of(experiment) if not pattern or re.search(pattern, " ".join(c))]
    return cells[:max_cells]


def main_real(args: argparse.Namespace) -> int:
    t0 = time.time()
    results: list[RealCellResult] = run_selected(
        args, run_real_cell, lambda r: f"{r.status:<6} {r.seconds:6.1f}s {r.experiment} "
                                       f"{r.cell} [{r.model_used}] {r.flags} {r.error}")
    out = results_dir() / "rehearsal"
    if args.append:
        results = merge_real(read_real_summary(out / "real_summary.csv"), results)
    write_real_summary(results, out, sum(r.seconds for r in results) if args.append
                       else time.time() - t0)
    failed = sum(r.status != "ok" for r in results)
    log.info("%d of %d cells ok; %s", len(results) - failed, len(results),
             out / "real_summary.md")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
