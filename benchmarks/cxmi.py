"""FilCo CXMI throughput: batched scoring vs the official code's one-sentence-at-a-time schedule.

    python -m benchmarks.cxmi [--examples 4] [--k 5] [--batch-size 16] [--model smollm2-135m]

Scores the sentences of the top-k BM25 wiki-vital passages of vital-qa train questions both
ways and checks that the two agree. `make bench` (section `cxmi`) runs `run()`; the command
line writes results/filco/cxmi_bench.json.
Environment for `make bench`: BENCH_CXMI_EXAMPLES (1).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

import numpy as np

from filco.cxmi import CxmiItem, CxmiScorer
from filco.split import split_sentences
from filco.tasks import get_task
from ragrepro.paths import results_dir

from .common import (
    BenchResult,
    interleaved_best,
    load_average,
    load_lm,
    markdown_table,
    ratio_target,
    wiki_vital_bm25,
)

log = logging.getLogger(__name__)

CXMI_TARGET = 5.0


def bench_items(n: int, k: int) -> list[CxmiItem]:
    from ragrepro.data.loaders import load_qa

    records = load_qa("vital-qa", "train", limit=n)
    _corpus, retriever = wiki_vital_bm25()
    hits = retriever.search([r.question for r in records], k)
    return [CxmiItem(r.question, r.answers[0],
                     tuple(s for h in hs for s in split_sentences(h.text)))
            for r, hs in zip(records, hits)]


def measure(model: str = "smollm2-135m", examples: int = 1, k: int = 5,
            batch_size: int = 16, repeat: int = 1) -> dict[str, Any]:
    """One row: sentences/s both ways (interleaved, best of `repeat`) and their largest gap."""
    lm = load_lm(model)
    items = bench_items(examples, k)
    n_sent = sum(len(it.sentences) for it in items)
    scorer = CxmiScorer(lm, get_task("qa"), batch_size=batch_size)
    times, vals = interleaved_best({"batched": lambda: scorer.log_ratios(items),
                                    "one_at_a_time":
                                        lambda: scorer.log_ratios_one_at_a_time(items)}, repeat)
    diff = float(np.max(np.abs(np.concatenate(vals["batched"])
                               - np.concatenate(vals["one_at_a_time"]))))
    return {"model": model, "examples": len(items), "k": k, "sentences": n_sent,
            "batch_size": batch_size, "batched_s": times["batched"],
            "one_at_a_time_s": times["one_at_a_time"],
            "batched_sent_per_s": n_sent / times["batched"],
            "one_at_a_time_sent_per_s": n_sent / times["one_at_a_time"],
            "speedup": times["one_at_a_time"] / times["batched"],
            "max_abs_diff_log_ratio": diff, "load_avg": load_average()}


def run() -> BenchResult:
    row = measure(examples=int(os.environ.get("BENCH_CXMI_EXAMPLES", "1")))
    summary = [("vital-qa train questions, sentences of the top-5 BM25 wiki-vital passages, "
               "prompt=paper. One at a time = the official measure_ctxs.py schedule (per "
               "sentence a forward pass with it and one without, batch 1)."), "",
               *markdown_table([{k: row[k] for k in ("sentences", "batched_sent_per_s",
                                                      "one_at_a_time_sent_per_s", "speedup",
                                                      "max_abs_diff_log_ratio")}])]
    diff = row["max_abs_diff_log_ratio"]
    targets = [ratio_target(f"CXMI batched >= {CXMI_TARGET:g}x one at a time", row["speedup"],
                            CXMI_TARGET, why="the one-at-a-time path recomputes the no-context "
                            "row per sentence (2 passes per sentence vs ~1 batched)"),
               ("CXMI batched == one at a time (|diff| < 1e-3)", diff < 1e-3, f"{diff:.1e}")]
    return BenchResult("cxmi", [row], summary, targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=4)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = measure(args.model, args.examples, args.k, args.batch_size)
    path = results_dir() / "filco" / "cxmi_bench.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    log.info("CXMI: %d sentences; batched %.2f sent/s, one at a time %.2f sent/s (x%.1f); "
             "max |diff| %.2e -> %s", out["sentences"], out["batched_sent_per_s"],
             out["one_at_a_time_sent_per_s"], out["speedup"], out["max_abs_diff_log_ratio"], path)


if __name__ == "__main__":
    main()
