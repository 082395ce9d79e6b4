"""Every swept cell of a config: the Hydra basic sweeper's cartesian product, as override
lists, plus the summary rows `make rehearse` writes."""
from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ..methods import MethodProfile, registered

# The sweep expansion lives in ragrepro.sweep (plan and lock use it too); importable here.
from ..sweep import split_values, sweep_cells  # noqa: F401

SUMMARY_FIELDS = ("experiment", "cell", "status", "seconds", "error")


@dataclass
class CellResult:
    experiment: str
    cell: str
    status: str          # ok | failed
    seconds: float
    error: str = ""


def coverage_problem(cfg: DictConfig, metrics: Mapping[str, Any] | None,
                     profiles: Sequence[MethodProfile] | None = None) -> str:
    """Why a finished cell still proves too little ('' when fine), as the methods' profiles
    judge it (`coverage`: e.g. a RALM retrieval cell that never reached a document)."""
    for profile in registered() if profiles is None else profiles:
        hook = profile.rehearsal.coverage
        problem = hook(cfg, metrics) if hook is not None else ""
        if problem:
            return problem
    return ""


def first_line(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text.splitlines()[0][:300] if text else type(err).__name__


def write_summary(results: Sequence[CellResult], folder: Path, total_seconds: float) -> None:
    """summary.csv (one row per cell) and summary.md (counts, failures)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "summary.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(SUMMARY_FIELDS)
        for r in results:
            w.writerow([r.experiment, r.cell, r.status, f"{r.seconds:.1f}", r.error])
    ok = sum(r.status == "ok" for r in results)
    counts = (f"{ok} of {len(results)} cells ok, {len(results) - ok} failed, "
              f"{total_seconds:.0f} s in all.")
    lines = ["# Rehearsal summary (stand-in models, fixture data: no number here is a result)",
             "", counts, "",
             "| experiment | cells | ok | failed | seconds |", "|---|---|---|---|---|"]
    by_exp: dict[str, list[CellResult]] = {}
    for r in results:
        by_exp.setdefault(r.experiment, []).append(r)
    for exp, rows in by_exp.items():
        n_ok = sum(r.status == "ok" for r in rows)
        lines.append(f"| {exp} | {len(rows)} | {n_ok} | {len(rows) - n_ok} | "
                     f"{sum(r.seconds for r in rows):.1f} |")
    failed = [r for r in results if r.status != "ok"]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- `{r.experiment}` `{r.cell}`: {r.error}" for r in failed]
    (folder / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- real-model rehearsal (`make rehearse-real`) -------------------------------------------
REAL_SUMMARY_FIELDS = ("experiment", "cell", "family", "model_used", "status", "flags",
                       "seconds", "error")


@dataclass
class RealCellResult:
    experiment: str
    cell: str
    family: str
    model_used: str
    status: str          # ok | failed
    seconds: float
    flags: str = ""      # flags_text of the row (conf/report/flags.yaml), "" when none
    error: str = ""
    real: bool = False   # the family's real member ran (not a stand-in, not a local model)


def flag_problem(metrics: Mapping[str, object] | None, real: bool,
                 rules: Sequence | None = None) -> tuple[str, str]:
    """(flags cell, why the cell fails or '') of a finished cell's metrics, by the rules of
    conf/report/flags.yaml. Only a real model's flags fail a cell: a random stand-in runs
    every generation to its (capped) budget by construction, so its flags say nothing."""
    from ..report.flags import flags_text

    text = flags_text(dict(metrics or {}), rules)
    return text, (f"flagged: {text}" if text and real else "")


def merge_real(earlier: Sequence[RealCellResult],
               later: Sequence[RealCellResult]) -> list[RealCellResult]:
    """Pure: earlier rows, each replaced by a later row of the same (experiment, cell), then
    the later rows that are new (`--append`: a summary built over several runs)."""
    new = {(r.experiment, r.cell): r for r in later}
    kept = [new.pop((r.experiment, r.cell), r) for r in earlier]
    return kept + list(new.values())


def read_real_summary(path: Path) -> list[RealCellResult]:
    """The rows of a real_summary.csv ([] when there is none)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return [RealCellResult(r["experiment"], r["cell"], r["family"], r["model_used"],
                               r["status"], float(r["seconds"]), r["flags"], r["error"],
                               # a family with a model that is no stand-in: the member ran
                               bool(r["family"]) and not r["model_used"].startswith("stand-in"))
                for r in csv.DictReader(f)]


def write_real_summary(results: Sequence[RealCellResult], folder: Path,
                       total_seconds: float) -> None:
    """real_summary.csv (one row per cell) and real_summary.md (counts, failures, flags)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "real_summary.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(REAL_SUMMARY_FIELDS)
        for r in results:
            w.writerow([r.experiment, r.cell, r.family, r.model_used, r.status, r.flags,
                        f"{r.seconds:.1f}", r.error])
    real = [r for r in results if r.real]
    ok = sum(r.status == "ok" for r in results)
    title = ("# Real-model rehearsal summary (embedded real models on fixture data, two "
             "examples: diagnostics, not results)")
    counts = (f"{ok} of {len(results)} cells ok, {len(results) - ok} failed; {len(real)} ran a "
              f"real model; {total_seconds:.0f} s in all.")
    lines = [title, "", counts, "",
             "| experiment | cell | family | model used | status | flags | seconds |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.experiment} | {r.cell or '(single)'} | {r.family or '-'} | {r.model_used} "
              f"| {r.status} | {r.flags or '-'} | {r.seconds:.1f} |" for r in results]
    failed = [r for r in results if r.status != "ok"]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- `{r.experiment}` `{r.cell}`: {r.error}" for r in failed]
    (folder / "real_summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
