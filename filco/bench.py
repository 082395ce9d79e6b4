"""CXMI throughput: batched scoring vs the official code's one-sentence-at-a-time schedule.

    python -m filco.bench [--examples 4] [--k 5] [--batch-size 16] [--model smollm2-135m]

Scores the sentences of the top-k BM25 wiki-vital passages of vital-qa train questions both
ways, checks that the two agree, and writes results/filco/cxmi_bench.json."""
from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np

from ragrepro.paths import CONF_DIR, results_dir

from .cxmi import CxmiItem, CxmiScorer
from .split import split_sentences
from .tasks import get_task

log = logging.getLogger(__name__)


def bench_items(n: int, k: int) -> list[CxmiItem]:
    from omegaconf import OmegaConf

    from ragrepro.data.loaders import load_qa
    from ragrepro.retrieval import build_corpus, build_retriever

    records = load_qa("vital-qa", "train", limit=n)
    corpus = build_corpus(OmegaConf.load(CONF_DIR / "corpus" / "wiki-vital.yaml"))
    retriever = build_retriever(OmegaConf.load(CONF_DIR / "retriever" / "bm25.yaml"), corpus)
    hits = retriever.search([r.question for r in records], k)
    return [CxmiItem(r.question, r.answers[0],
                     tuple(s for h in hs for s in split_sentences(h.text)))
            for r, hs in zip(records, hits)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=4)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--model", default="smollm2-135m")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    mcfg = OmegaConf.load(CONF_DIR / "model" / f"{args.model}.yaml")
    mcfg.dtype, mcfg.device = "float32", "cpu"
    lm = instantiate(mcfg)
    items = bench_items(args.examples, args.k)
    n_sent = sum(len(it.sentences) for it in items)
    scorer = CxmiScorer(lm, get_task("qa"), batch_size=args.batch_size)
    t0 = time.perf_counter()
    batched = scorer.log_ratios(items)
    t_batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    single = scorer.log_ratios_one_at_a_time(items)
    t_single = time.perf_counter() - t0
    diff = float(np.max(np.abs(np.concatenate(batched) - np.concatenate(single))))
    out = {"model": args.model, "examples": len(items), "k": args.k, "sentences": n_sent,
           "batch_size": args.batch_size, "batched_s": t_batched, "one_at_a_time_s": t_single,
           "batched_sent_per_s": n_sent / t_batched, "one_at_a_time_sent_per_s": n_sent / t_single,
           "speedup": t_single / t_batched, "max_abs_diff_log_ratio": diff,
           # other processes share the CPU on the machines we measured on: record how many
           "load_avg_1min_at_end": __import__("os").getloadavg()[0]}
    path = results_dir() / "filco" / "cxmi_bench.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1))
    log.info("CXMI: %d sentences; batched %.2f sent/s, one at a time %.2f sent/s (x%.1f); "
             "max |diff| %.2e -> %s", n_sent, out["batched_sent_per_s"],
             out["one_at_a_time_sent_per_s"], out["speedup"], diff, path)


if __name__ == "__main__":
    main()
