"""Every swept cell of a config: the Hydra basic sweeper's cartesian product, as override
lists, plus the summary rows `make rehearse` writes."""
from __future__ import annotations

import csv
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SUMMARY_FIELDS = ("experiment", "cell", "status", "seconds", "error")


def split_values(value: object) -> list[str]:
    """`a,b,c` -> [a, b, c] (the basic sweeper's comma list); a scalar is one value."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def sweep_cells(params: Mapping[str, object] | None) -> list[list[str]]:
    """[["k1=v", "k2=w"], ...] in the basic sweeper's order; no params -> one empty cell."""
    if not params:
        return [[]]
    keys = list(params)
    values = [split_values(params[k]) for k in keys]
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in itertools.product(*values)]


@dataclass
class CellResult:
    experiment: str
    cell: str
    status: str          # ok | failed
    seconds: float
    error: str = ""


def coverage_problem(rerank: str | None, metrics: dict | None) -> str:
    """Why a finished cell still proves too little ('' when fine): a retrieval cell whose
    text fit in the first window never retrieved."""
    if rerank not in (None, "none") and metrics and metrics.get("n_windows_with_doc") == 0:
        return (f"rerank={rerank} but no window had a document: the fixture text is shorter "
                f"than one window, so retrieval was never exercised")
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
