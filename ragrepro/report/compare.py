"""`ragrepro compare RUN_A RUN_B ...`: the settings that differ, and the metrics side by side.

Runs are given as folders (results/<experiment>/<run_id>), `experiment/run_id`, or run ids
(a unique prefix is enough).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ..paths import results_dir
from .flags import flags_text, has_diagnostics, merged_row
from .runs import RunRecord, find_run
from .samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for
from .table_stats import zero_mark

log = logging.getLogger(__name__)

# Config keys that never change a number (they are also excluded from the run id).
IGNORED_PREFIXES = ("wandb.", "hydra.", "overwrite", "results_dir", "log_level", "progress")
MISSING = "(unset)"


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values (shown as JSON)."""
    if not isinstance(obj, dict):
        return {prefix: obj} if prefix else {}
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def differing(dicts: list[dict[str, Any]], ignore: tuple[str, ...] = ()) -> list[tuple[str, list[Any]]]:
    """Keys whose values are not all equal (a key missing from some dicts differs)."""
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    out = []
    for k in sorted(keys):
        if any(k.startswith(p) for p in ignore):
            continue
        values = [d.get(k, MISSING) for d in dicts]
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) > 1:
            out.append((k, values))
    return out


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool))
            or v is None}


def side_by_side(dicts: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    return [(k, [d.get(k, MISSING) for d in dicts]) for k in keys]


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    return str(v)


def text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def compare_runs(runs: list[RunRecord], st: StatsSettings = DEFAULT_STATS) -> str:
    names = [f"{r.experiment}/{r.run_id}" for r in runs]
    heads = ["", *[f"[{i + 1}]" for i in range(len(runs))]]
    parts = ["Runs:", *[f"  [{i + 1}] {n}  ({r.dir or 'no folder'})"
                        for i, (n, r) in enumerate(zip(names, runs))], ""]
    parts += flags_block(runs)
    settings = differing([flatten(r.settings or r.row) for r in runs])
    config = differing([flatten(r.config) for r in runs], IGNORED_PREFIXES)
    parts.append("Settings that differ:")
    rows = [[k, *[_cell(v) for v in vals]] for k, vals in settings]
    rows += [[f"config.{k}", *[_cell(v) for v in vals]] for k, vals in config
             if k not in {s for s, _ in settings}]
    parts.append(text_table(["setting", *heads[1:]], rows) if rows else "  (none: same settings)")
    parts.append("")
    parts += metrics_block(runs, heads[1:], st)
    return "\n".join(parts) + "\n"


def flags_block(runs: list[RunRecord]) -> list[str]:
    """Each run's flags (ragrepro.report.flags) when any run records diagnostics; nothing
    for runs made before them, so their comparison reads as it did."""
    rows = [merged_row(r.metrics, r.row) for r in runs]
    if not any(has_diagnostics(row) for row in rows):
        return []
    cells = [(flags_text(row) or "(none)") if has_diagnostics(row) else "(no diagnostics)"
             for row in rows]
    return ["Flags (conf/report/flags.yaml; docs/report.md#flags):",
            *[f"  [{i + 1}] {c}" for i, c in enumerate(cells)], ""]


def _with_ci(run: RunRecord, metric: str, value: Any, st: StatsSettings) -> str:
    """The value, and its 95% CI and n when the run's per-sample records give them."""
    iv = interval_for(run.dir, run.metrics or {}, metric, st) if isinstance(value, float) \
        else None
    if iv is None:
        return _cell(value)
    return f"{_cell(value)} [{iv.low:.4g}, {iv.high:.4g}] n={iv.n}"


def _paired_cell(base: RunRecord, run: RunRecord, metric: str, st: StatsSettings) -> str:
    test, why = paired_for(run.dir, run.metrics or {}, base.dir, base.metrics or {}, metric,
                           "diff", st)
    if test is None:
        return f"({why})"
    mark = ("≈0 (CI includes 0)" if test.includes_zero
            else zero_mark(False, test.p_value).strip())
    return (f"{test.estimate:+.4g} [{test.low:+.4g}, {test.high:+.4g}] "
            f"p={test.p_value:.3g} {mark}")


def metrics_block(runs: list[RunRecord], heads: list[str], st: StatsSettings) -> list[str]:
    """Metrics side by side with n and 95% CI, then each run paired against run [1]."""
    metrics = side_by_side([scalar_metrics(r.metrics or {}) for r in runs])
    if not metrics:
        return ["Metrics:", "  (no metrics)"]
    out = ["Metrics (value [95% CI] n, where per-sample records exist):",
           text_table(["metric", *heads], [[k, *[_with_ci(r, k, v, st)
                                                   for r, v in zip(runs, vals)]]
                                              for k, vals in metrics]), ""]
    paired = [(k, [_paired_cell(runs[0], r, k, st) for r in runs[1:]]) for k, vals in metrics
              if all(isinstance(v, float) for v in vals)]
    paired = [(k, cells) for k, cells in paired if not all(c.startswith("(") for c in cells)]
    out.append(f"Paired against [1] on the same examples (difference run - [1], 95% CI, "
               f"permutation p; {st.describe()}):")
    out.append(text_table(["metric", *heads[1:]], [[k, *cells] for k, cells in paired])
               if paired else "  (no metric has per-sample records in both runs)")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ragrepro compare",
                                     description="Compare the settings and metrics of runs.")
    parser.add_argument("runs", nargs="+", help="run folders, experiment/run_id or run ids")
    parser.add_argument("--results", type=Path, default=None, help="results folder")
    parser.add_argument("--resamples", type=int, default=DEFAULT_STATS.resamples,
                        help="bootstrap / permutation resamples (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_STATS.seed,
                        help="seed of the resamples (default %(default)s)")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give at least two runs to compare")
    root = args.results or results_dir()
    runs = [find_run(root, ref) for ref in args.runs]  # a bad name: exit 2 (ragrepro.cli)
    sys.stdout.write(compare_runs(runs, StatsSettings(args.resamples, args.seed)))
