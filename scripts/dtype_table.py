"""float32 against bfloat16 for the ladder's 0.5B without retrieval, from two finished runs:

    ragrepro experiment=ralm/table1_ladder model=qwen2.5-coder-0.5b ralm/rerank=none \
        dtype=float32 name=ralm/ladder_f32           # and dtype=bfloat16 name=ralm/ladder_bf16
    python -m scripts.dtype_table                    # results/ladder/dtype.md

No model is run here: perplexities, intervals, the paired drift and the stage times are read
from the runs (their folders, or their committed evidence bundles on a fresh clone). The two
runs score the same windows (one tokenizer), so the drift is a paired test on the same blocks.
"""
from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from ragrepro.errors import DataError
from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.report.runs import RunRecord, experiment_runs
from ragrepro.report.samples import interval_for, paired_for
from ragrepro.report.table_stats import fmt_ci

log = logging.getLogger(__name__)

EXPERIMENTS = {"float32": "ralm/ladder_f32", "bfloat16": "ralm/ladder_bf16"}
COMMAND = ("ragrepro experiment=ralm/table1_ladder model=qwen2.5-coder-0.5b ralm/rerank=none "
           "dtype=D name=ralm/ladder_f32|ralm/ladder_bf16")
# settings that must agree for the comparison to be about dtype alone
SAME = ("model", "dataset", "dataset_variant", "split", "limit", "max_length", "stride",
        "rerank", "retriever", "device")


def latest_run(root: Path, experiment: str, dtype: str) -> RunRecord:
    runs = [r for r in experiment_runs(root, experiment)
            if r.dir is not None and r.metrics and str(r.settings.get("dtype")) == dtype]
    if not runs:
        raise DataError(f"No finished {dtype} run of {experiment} under {root}: run "
                        f"`{COMMAND.replace('dtype=D', f'dtype={dtype}')}` (about 2-5 min).")
    return max(runs, key=lambda r: float(r.metadata.get("started_at") or 0.0))


def timings(run: RunRecord) -> dict[str, float]:
    return run.metrics_json.get("timings_s") or {}


def check_same_settings(runs: dict[str, RunRecord]) -> None:
    for key in SAME:
        values = {str(r.settings.get(key)) for r in runs.values()}
        if len(values) > 1:
            raise DataError(f"The dtype runs differ in {key} ({', '.join(sorted(values))}): "
                            f"rerun one with the other's settings.")


def row(dtype: str, run: RunRecord) -> str:
    m, t = run.metrics, timings(run)
    ci = interval_for(run.dir, m, "ppl_word")
    word = fmt_ci(m["ppl_word"], ci.low if ci else None, ci.high if ci else None)
    return (f"| {dtype} | {word} | {m['ppl_token']:.2f} | {m['n_windows']} | "
            f"{t.get('evaluate', float('nan')):.1f} |")


def render(runs: dict[str, RunRecord]) -> str:
    f32, bf16 = runs["float32"], runs["bfloat16"]
    s = f32.settings
    test, why = paired_for(bf16.dir, bf16.metrics, f32.dir, f32.metrics, "ppl_word", "rel")
    drift = (f"{test.estimate * 100:+.2f}% [{test.low * 100:+.2f}, {test.high * 100:+.2f}] "
             f"over {test.n} {test.unit}, p={test.p_value:.3g}" if test else why)
    speed = timings(f32)["evaluate"] / timings(bf16)["evaluate"]
    machine = f32.metadata.get("machine") or {}
    title = (f"# {s['model']}, no retrieval: float32 vs bfloat16 (Table 1 ladder settings, "
             f"{f32.metrics['n_windows']} windows)")
    lines = [title, "",
             (f"Built by `python -m scripts.dtype_table` from the runs of `{COMMAND}`. "
              "Word-level perplexity [95% CI over blocks of windows]; evaluate is each run's "
              "recorded time of its forward passes in seconds (the model load is left out: "
              "the first of the two runs also converts the GGUF file), on "
              f"{machine.get('cpu', 'an unrecorded CPU')} with "
              f"{machine.get('torch_threads', '?')} torch thread(s), so their ratio depends "
              "on the machine and its load at the time."), "", "## Measured", "",
             "| dtype | PPL (word) | PPL (token) | windows | evaluate (s) |",
             "|---|---|---|---|---|",
             row("float32", f32), row("bfloat16", bf16), "",
             (f"bfloat16 evaluates {speed:.1f}x faster than float32; its word-level perplexity "
              f"differs by {drift} (bfloat16 relative to float32, paired on the same blocks)."),
             "", "Settings: " + ", ".join(f"{k}={s.get(k)}" for k in SAME if k in s) + ".",
             "Runs: " + ", ".join(f"{d} {r.experiment}/{r.run_id}" for d, r in runs.items())
             + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=None, help="default: results/")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = args.results or results_dir()
    runs: dict[str, Any] = {d: latest_run(root, e, d) for d, e in EXPERIMENTS.items()}
    check_same_settings(runs)
    out = root / "ladder" / "dtype.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, render(runs))
    log.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
