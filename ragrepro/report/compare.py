"""`ragrepro compare RUN_A RUN_B ...`: the settings that differ, and the metrics side by side.

Runs are given as folders (results/<experiment>/<run_id>), `experiment/run_id`, or run ids
(a unique prefix is enough). `--flips` adds, for each run against the first, the questions or
perplexity blocks whose outcome changed (ragrepro.report.flips), both outputs side by side.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, did_you_mean
from ..paths import results_dir
from .config_diff import IGNORED_PREFIXES, MISSING, differing, flatten
from .flags import flags_text, has_diagnostics, merged_row
from .flips import LABELS, FlipItem, Flips, counts_text, fmt_score, item_texts, pair_flips
from .runs import RunRecord, find_run
from .samples import DEFAULT_STATS, StatsSettings, interval_for, paired_for
from .table_stats import zero_mark

log = logging.getLogger(__name__)

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

@dataclass(frozen=True)
class FlipOptions:
    """`--flips`: the metric (None: the runs' per-sample score, else their perplexity), how
    many changed items to list per direction (None: all) and how wide a text cell is."""

    metric: str | None = None
    limit: int | None = 10
    width: int = 40

def compare_runs(runs: list[RunRecord], st: StatsSettings = DEFAULT_STATS,
                 flips: FlipOptions | None = None) -> str:
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
    if flips is not None:
        parts += ["", *flips_block(runs, st, flips)]
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
    return paired_cell_text(test.estimate, test.low, test.high, test.p_value,
                            test.includes_zero)

def paired_cell_text(estimate: float, low: float, high: float, p_value: float,
                     includes_zero: bool) -> str:
    """'+0.09 [-0.16, +0.37] p=0.578 ≈0 (CI includes 0)': a paired difference as compare
    prints it (the dashboard's flips view prints the same text)."""
    mark = "≈0 (CI includes 0)" if includes_zero else zero_mark(False, p_value).strip()
    return f"{estimate:+.4g} [{low:+.4g}, {high:+.4g}] p={p_value:.3g} {mark}"

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

def flips_block(runs: list[RunRecord], st: StatsSettings, opt: FlipOptions) -> list[str]:
    """Each run against [1]: the counts of changed outcomes beside the paired test on the same
    metric, then the changed questions (or blocks) with both sides' outputs."""

    out = ["Per-sample flips against [1] (docs/report.md#per-sample-flips):"]
    for j, run in enumerate(runs[1:], start=2):
        f, why = pair_flips(runs[0], run, opt.metric, st)
        if f is None:
            out += [f"[{j}] vs [1]: ({why})", ""]
            continue
        out.append(f"[{j}] vs [1]: {f.metric} on {f.n} {f.unit}; {f.rule}")
        out.append(f"  {counts_text(f)}   paired {f.metric} ([{j}] - [1]): "
                   f"{_paired_cell(runs[0], run, f.metric, st)}")
        for change in ("right_to_wrong", "wrong_to_right") if f.kind == "outcome" \
                else ("worse", "better"):
            items = f.of(change)
            if not items:
                continue
            shown = items if opt.limit is None else items[:opt.limit]
            out.append(f"  {LABELS[change]} ({len(shown)} of {len(items)} shown, "
                       f"{f.ordered_by}):")
            out += _flip_rows(runs[0], run, f, shown, j, opt.width)
        out.append("")
    return out

def _indent(text: str, pad: str = "    ") -> list[str]:
    return [pad + ln for ln in text.splitlines()]

def _flip_rows(a: RunRecord, b: RunRecord, f: Flips, items: list[FlipItem], j: int,
               width: int) -> list[str]:

    ta, tb = item_texts(a, f, items, width), item_texts(b, f, items, width)
    if f.kind == "outcome":
        rows = [[it.label, ta[it.label]["question"] or tb[it.label]["question"],
                 ta[it.label]["gold"] or tb[it.label]["gold"],
                 ta[it.label]["output"], tb[it.label]["output"],
                 fmt_score(it.a, f.kind), fmt_score(it.b, f.kind),
                 ta[it.label]["finish"], tb[it.label]["finish"]] for it in items]
        return _indent(text_table(["id", "question", "gold", "[1] output", f"[{j}] output",
                                   f"[1] {f.metric}", f"[{j}] {f.metric}", "[1] finish",
                                   f"[{j}] finish"], rows))
    out: list[str] = []
    for it in items:
        out.append(f"    {it.label}: NLL per {f.per} [1] {fmt_score(it.a, f.kind)}, "
                   f"[{j}] {fmt_score(it.b, f.kind)} ({it.delta:+.4f})")
        wa, wb = ta[it.label], tb[it.label]
        out += _indent(text_table(["window", "query", "[1] document", f"[{j}] document"],
                                  window_rows(wa, wb)), "      ")
    return out

def window_rows(wa: list[dict[str, str]], wb: list[dict[str, str]]) -> list[list[str]]:
    """One row per window of a block: its query (one run's when only one retrieved, both
    when they differ) and each run's document."""
    none = {"query": "", "doc": "(no window)"}
    rows = []
    for n in range(max(len(wa), len(wb))):
        x = wa[n] if n < len(wa) else {**none, "window": wb[n]["window"]}
        y = wb[n] if n < len(wb) else {**none, "window": x["window"]}
        q = x["query"] if not y["query"] or x["query"] == y["query"] else \
            y["query"] if not x["query"] else f"{x['query']} / {y['query']}"
        rows.append([x["window"], q, x["doc"], y["doc"]])
    return rows

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ragrepro compare",
                                     description="Compare the settings and metrics of runs.")
    parser.add_argument("runs", nargs="+", help="run folders, experiment/run_id or run ids")
    parser.add_argument("--results", type=Path, default=None, help="results folder")
    parser.add_argument("--resamples", type=int, default=DEFAULT_STATS.resamples,
                        help="bootstrap / permutation resamples (default %(default)s)")
    parser.add_argument("--seed", type=int, default=DEFAULT_STATS.seed,
                        help="seed of the resamples (default %(default)s)")
    parser.add_argument("--flips", action="store_true",
                        help="list the questions or blocks whose outcome changed against the "
                             "first run, both outputs side by side")
    parser.add_argument("--limit", type=int, default=None,
                        help="with --flips: changed items listed per direction (0: all; "
                             f"default {FlipOptions.limit})")
    parser.add_argument("--metric", default=None,
                        help="with --flips: the per-sample metric (default: the runs' "
                             "per-sample score, e.g. em, else the token perplexity)")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give at least two runs to compare")
    if args.limit is not None and args.limit < 0:
        parser.error("--limit: give 0 (all) or a positive number of items")
    if not args.flips and (args.metric is not None or args.limit is not None):
        parser.error("--limit and --metric choose what --flips lists: add --flips")
    root = args.results or results_dir()
    runs = [find_run(root, ref) for ref in args.runs]  # a bad name: exit 2 (ragrepro.cli)
    limit = FlipOptions.limit if args.limit is None else (args.limit or None)
    opt = FlipOptions(args.metric, limit) if args.flips else None
    if opt is not None and opt.metric is not None:
        check_flip_metric(runs, opt.metric)
    sys.stdout.write(compare_runs(runs, StatsSettings(args.resamples, args.seed), opt))

def check_flip_metric(runs: list[RunRecord], metric: str) -> None:
    """A --metric every run records, or a ConfigError listing the ones they share."""
    missing = [f"{r.experiment}/{r.run_id}" for r in runs if metric not in (r.metrics or {})]
    if missing:
        shared = sorted(set.intersection(*[set(scalar_metrics(r.metrics or {})) for r in runs]))
        raise ConfigError(f"--metric {metric}: not recorded by {', '.join(missing)}."
                          f"{did_you_mean(metric, shared)} Metrics all runs record: "
                          f"{', '.join(shared) or '(none)'}.")
