"""Benchmark 1: RALM evaluation throughput, the production engine vs the literal official loop.

Same model, token stream (held-out wiki-vital test text), documents (BM25, retrieved once per
window and given to both paths) and settings, float32; both paths must give the same NLL sum
(1e-4 relative). The two paths run interleaved (production, official, production, ...) and
each keeps its best time, so their ratio survives a shared machine. Then the production path
runs in bfloat16: its speed ratio to float32 and the perplexity drift.

    python -m benchmarks.ralm_throughput [--models smollm2-135m] [--tokens 384] [--repeat 2]

Environment: BENCH_RALM_TOKENS, BENCH_RALM_REPEAT, BENCH_RALM_MODELS (comma list).
"""
from __future__ import annotations

import argparse
import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ralm.documents import doc_encoder
from ralm.engine import StreamEval
from ralm.lm_eval import RetrieverSource
from ralm.official_loop import OfficialResult, official_eval
from ralm.rerank import Rerank
from ralm.settings import RunSettings, settings_from_defaults
from ralm.windows import Window, make_windows

from .common import (
    BenchResult,
    interleaved_best,
    load_average,
    load_lm,
    markdown_tables,
    matmul_peak_gflops,
    ratio_target,
    read_rows,
    wiki_vital_bm25,
)

log = logging.getLogger(__name__)

TARGET_SPEEDUP = {"smollm2-135m": 3.0, "gemma3-270m": 4.0}
NLL_RTOL = 1e-4
# the Table 1 mini settings (ralm/conf/ralm/mini.yaml): L=256, s=16, 96-token documents, k=4
BASE_VALUES = {"max_length": 256, "stride": 16, "retrieval_stride": 16, "query_len": 32,
               "doc_max_tokens": 96, "k": 4, "rerank": "zeroshot", "rerank_tokens": 16,
               "window_bos": False, "batch_windows": 16}


def settings(**values: Any) -> RunSettings:
    """BASE_VALUES with `values` over them (the rest: ralm/conf/ralm/base.yaml)."""
    return settings_from_defaults({**BASE_VALUES, **values}, seed=0, batch_size=8,
                                  model_adds_bos=False)


BASE = settings()
# (label, rerank strategy, official ranking_strategy, candidates)
CASES = (("BM25 top-1", "first", "first", 1), ("BM25 + zero-shot rerank, k=4", "zeroshot",
                                                 "logprob", 4))


@dataclass
class Workload:
    """What one path computes: forward rows of `row_len` tokens and vocabulary-logit positions."""

    rows: int
    row_len: int
    head_positions_production: int
    head_positions_official: int
    scored_tokens: int


def workload(windows: Sequence[Window], n_docs: dict[int, int], rerank: Rerank,
             rerank_tokens: int) -> Workload:
    """Rows and logit positions of both paths for these windows (pure arithmetic).

    Official: every row computes logits at every position. Production: only where a token is
    scored (window 0: all but the first; zero-shot candidates: s' ranking + target tokens)."""
    rows = prod = off = 0
    length = max(w.length for w in windows)
    for w in windows:
        n = n_docs.get(w.index, 0) if w.index > 0 else 0
        r = n if rerank.lm_ranked and n > 0 else 1
        rows += r
        off += r * w.length
        if rerank.ranks_prefix and n > 0:
            prod += r * (rerank_tokens + w.n_scored)
        else:
            prod += w.n_scored
    return Workload(rows, length, prod, off, sum(w.n_scored for w in windows))


def bench_stream(lm: Any, n_tokens: int) -> list[int]:
    """The first n_tokens of the held-out wiki-vital test articles joined into one stream
    (official: documents joined with ""), with the model's BOS policy."""
    from ragrepro.data.vital import lm_docs

    ids = lm.encode("".join(d.text for d in lm_docs("test")))
    if len(ids) < n_tokens:
        raise ValueError(f"the held-out test text has only {len(ids)} tokens (< {n_tokens})")
    return ids[:n_tokens]


class FixedDocs:
    """Documents retrieved once per window, handed to both paths."""

    def __init__(self, by_window: dict[int, list[dict[str, Any]]]):
        self.by_window = by_window

    def docs(self, text_index: int, windows: Sequence[Window],
             queries: Sequence[str]) -> list[list[dict[str, Any]]]:
        return [self.by_window.get(w.index, []) for w in windows]


def retrieve_once(lm: Any, stream: Sequence[int], s: RunSettings) -> dict[int, list[dict]]:
    """BM25 top-k over wiki-vital for every window's query (held-out titles excluded)."""
    from ragrepro.data.vital import heldout_titles

    _corpus, retriever = wiki_vital_bm25()
    ev = StreamEval(lm, s, None, lambda d: [])
    windows = make_windows(len(stream), s.ralm.max_length, s.ralm.stride)[1:]
    queries = [ev.query_of(stream, w) for w in windows]
    docs = RetrieverSource(retriever, s.ralm.k, heldout_titles()).docs(0, windows, queries)
    return {w.index: d for w, d in zip(windows, docs)}


def production_nll(lm: Any, stream: Sequence[int], s: RunSettings,
                   docs: dict[int, list[dict]]) -> tuple[float, list[int | None]]:
    ev = StreamEval(lm, s, FixedDocs(docs), doc_encoder(lm, s.ralm.doc_max_tokens, False),
                    bos_id=lm.bos_id)
    recs = ev.run(stream)
    return sum(r["nll_sum"] for r in recs), [r.get("doc_rank") for r in recs]


def official_nll(lm: Any, stream: Sequence[int], s: RunSettings, strategy: str,
                 docs: dict[int, list[dict]]) -> OfficialResult:
    r = s.ralm
    n_windows = len(make_windows(len(stream), r.max_length, r.stride))
    retrieval = [{"retrieved_docs": docs.get(i, [])} for i in range(n_windows)]
    return official_eval(lm.model, lm.tokenizer, torch.tensor([list(stream)]), r.max_length,
                         r.stride, retrieval, strategy, r.k, r.rerank_tokens, r.doc_max_tokens)


def body_flops(lm: Any, length: int) -> int:
    """Matmul FLOPs of one [1, length] pass through the transformer body (no vocabulary head),
    counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.full((1, length), 100, dtype=torch.long)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        lm.model.base_model(input_ids=x)
    return int(fc.get_total_flops())


def head_flops_per_position(lm: Any) -> int:
    emb = lm.model.get_output_embeddings().weight
    return 2 * int(emb.shape[0]) * int(emb.shape[1])


def bench_model(name: str, n_tokens: int, repeat: int) -> tuple[list[dict], list[tuple]]:
    lm = load_lm(name, "float32")
    stream = bench_stream(lm, n_tokens)
    windows = make_windows(len(stream), BASE.ralm.max_length, BASE.ralm.stride)
    docs = retrieve_once(lm, stream, BASE)
    body = body_flops(lm, BASE.ralm.max_length)
    head = head_flops_per_position(lm)
    lm_bf16 = load_lm(name, "bfloat16")
    rows, targets = [], []
    for label, rerank, strategy, k in CASES:
        s = settings(rerank=rerank, k=k)
        cand = {i: d[:k] for i, d in docs.items()}
        # all three side by side, so drift of a shared machine hits each alike
        times, vals = interleaved_best({
            "production": lambda s=s, cand=cand: production_nll(lm, stream, s, cand),
            "official": lambda s=s, cand=cand, strategy=strategy: official_nll(
                lm, stream, s, strategy, cand),
            "bf16": lambda s=s, cand=cand: production_nll(lm_bf16, stream, s, cand)}, repeat)
        (prod, chosen), off = vals["production"], vals["official"]
        bf_times, bf_vals = times, vals
        wl = workload(windows, {i: len(d) for i, d in cand.items()}, s.rerank,
                      s.ralm.rerank_tokens)
        f_prod = wl.rows * body + head * wl.head_positions_production
        f_off = wl.rows * body + head * wl.head_positions_official
        rel = abs(prod - off.nll_sum) / abs(off.nll_sum)
        ppl32 = math.exp(prod / wl.scored_tokens)
        ppl16 = math.exp(bf_vals["bf16"][0] / wl.scored_tokens)
        row = {
            "model": name, "case": label, "rerank": rerank, "k": k, "dtype": "float32",
            "tokens": len(stream), "scored_tokens": wl.scored_tokens, "windows": len(windows),
            "forward_rows": wl.rows, **{f"s_{f}": v for f, v in {**asdict(s.ralm), "batch_size": s.batch_size}.items()
                                        if f in ("max_length", "stride", "doc_max_tokens",
                                                 "rerank_tokens", "batch_size",
                                                 "batch_windows")},
            "production_s": times["production"], "official_s": times["official"],
            "production_tok_per_s": wl.scored_tokens / times["production"],
            "official_tok_per_s": wl.scored_tokens / times["official"],
            "speedup": times["official"] / times["production"],
            "nll_production": prod, "nll_official": off.nll_sum, "nll_rel_diff": rel,
            "same_choices": [c for c in chosen[1:]] == off.chosen[1:],
            "production_gflop": f_prod / 1e9, "official_gflop": f_off / 1e9,
            "flop_ratio": f_off / f_prod,
            "production_gflops": f_prod / times["production"] / 1e9,
            "official_gflops": f_off / times["official"] / 1e9,
            "bf16_s": bf_times["bf16"], "bf16_speedup": times["production"] / bf_times["bf16"],
            "bf16_vs_official": times["official"] / bf_times["bf16"],
            "ppl_token_f32": ppl32, "ppl_token_bf16": ppl16,
            "bf16_ppl_drift_rel": (ppl16 - ppl32) / ppl32,
            "bf16_gflops": f_prod / bf_times["bf16"] / 1e9,
            "repeat": repeat, "threads": torch.get_num_threads(), "load_avg": load_average()}
        rows.append(row)
        log.info("ralm bench %s %s: x%.2f (NLL rel diff %.1e)", name, label, row["speedup"], rel)
        targets.append(ratio_target(f"{name}, {label}: production >= {TARGET_SPEEDUP[name]:.0f}x "
                                    f"official tokens/s", row["speedup"], TARGET_SPEEDUP[name],
                                    why=_why(row)))
        targets.append((f"{name}, {label}: same NLL (rel. {NLL_RTOL:g})", rel <= NLL_RTOL,
                        f"{rel:.1e}"))
    return rows, targets


def _why(row: dict[str, Any]) -> str:
    eff = row["production_gflops"] / row["official_gflops"]
    return (f"exact float32 scoring leaves the transformer body the same work on both paths "
            f"(production skips only the vocabulary head at unscored positions), so the "
            f"official loop does {row['flop_ratio']:.2f}x the FLOPs and the speedup is that "
            f"times the efficiency ratio ({row['production_gflops']:.0f} vs "
            f"{row['official_gflops']:.0f} GFLOP/s = {eff:.2f}x)")


def summarize(rows: list[dict[str, Any]], peak32: float, peak16: float) -> list[str]:
    lines = [(f"Matmul peak measured in this process: float32 {peak32:.0f} GFLOP/s, "
             f"bfloat16 {peak16:.0f} GFLOP/s. Settings: L={BASE.ralm.max_length}, "
             f"stride={BASE.ralm.stride}, doc_max_tokens={BASE.ralm.doc_max_tokens}, "
             f"rerank_tokens={BASE.ralm.rerank_tokens}; documents retrieved once (BM25, wiki-vital) "
             f"and given to both paths."), ""]
    return lines + table_lines(rows, peak32, peak16)


def table_lines(rows: list[dict[str, Any]], peak32: float, peak16: float) -> list[str]:
    """Two readable tables (ragrepro.report.readable): speed and agreement, then the FLOP
    rates against the measured peak; every number is in ralm_throughput.csv."""
    view = []
    for r in rows:
        view.append({"model": r["model"], "case": r["case"], "scored tok": r["scored_tokens"],
                     "prod tok/s": r["production_tok_per_s"],
                     "official tok/s": r["official_tok_per_s"], "speedup": r["speedup"],
                     "NLL rel diff": r["nll_rel_diff"], "bf16 speedup": r["bf16_speedup"],
                     "bf16 vs official": r["bf16_vs_official"],
                     "bf16 ppl drift": f"{100 * r['bf16_ppl_drift_rel']:+.3f}%",
                     "FLOP ratio": r["flop_ratio"],
                     "prod GFLOP/s (% peak)": f"{r['production_gflops']:.0f} "
                                              f"({100 * r['production_gflops'] / peak32:.0f}%)",
                     "official GFLOP/s (% peak)": f"{r['official_gflops']:.0f} "
                                                  f"({100 * r['official_gflops'] / peak32:.0f}%)",
                     "bf16 GFLOP/s (% peak)": f"{r['bf16_gflops']:.0f} "
                                              f"({100 * r['bf16_gflops'] / peak16:.0f}%)"})
    return markdown_tables(view, TABLES)


# The columns of table_lines' two tables.
TABLES = (("Speed and agreement", ["model", "case", "scored tok", "prod tok/s", "official tok/s",
                                   "speedup", "NLL rel diff", "bf16 speedup", "bf16 vs official",
                                   "bf16 ppl drift"]),
          ("FLOP rates (% of the measured matmul peak)",
           ["model", "case", "FLOP ratio", "prod GFLOP/s (% peak)",
            "official GFLOP/s (% peak)", "bf16 GFLOP/s (% peak)"]))


def rewrite_readme_from_csv(readme: Path) -> Path:
    """The README's ralm_throughput tables rewritten from ralm_throughput.csv beside it (the
    lines its measurement wrote around them are kept)."""
    rows = read_rows(readme.parent / "ralm_throughput.csv")
    text = readme.read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n## ralm_throughput\n")
    if not sep:
        raise SystemExit(f"{readme} has no ralm_throughput section to rewrite")
    section, nxt, tail = rest.partition("\n## ")
    lines = section.split("\n")  # not splitlines: the blank line before the next "## " stays
    # the tables (and their captions) run from the first one to the targets' table
    start = next(i for i, ln in enumerate(lines) if ln.startswith(("|", "**")))
    end = next(i for i, ln in enumerate(lines) if ln.startswith("| target |"))
    new = table_lines(rows, float(rows[0]["peak_f32_gflops"]), float(rows[0]["peak_bf16_gflops"]))
    section = "\n".join(lines[:start] + new + [""] + lines[end:])
    readme.write_text(head + sep + section + (nxt + tail if nxt else "\n"), encoding="utf-8")
    return readme


def run(models: Sequence[str] | None = None, n_tokens: int | None = None,
        repeat: int | None = None) -> BenchResult:
    models = list(models or os.environ.get("BENCH_RALM_MODELS",
                                           "smollm2-135m,gemma3-270m").split(","))
    n_tokens = n_tokens or int(os.environ.get("BENCH_RALM_TOKENS", "384"))
    repeat = repeat or int(os.environ.get("BENCH_RALM_REPEAT", "2"))
    rows: list[dict] = []
    targets: list[tuple] = []
    peak = (matmul_peak_gflops("float32", 2048), matmul_peak_gflops("bfloat16", 2048))
    for name in models:
        r, t = bench_model(name, n_tokens, repeat)
        rows += r
        targets += t
    # the peak is measured twice (before and after) and the higher kept: a shared machine
    # only ever makes it look lower
    peak32 = max(peak[0], matmul_peak_gflops("float32", 2048))
    peak16 = max(peak[1], matmul_peak_gflops("bfloat16", 2048))
    summary = summarize(rows, peak32, peak16)
    for r in rows:
        r.update(peak_f32_gflops=peak32, peak_bf16_gflops=peak16)
    return BenchResult("ralm_throughput", rows, summary, targets)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="smollm2-135m,gemma3-270m")
    ap.add_argument("--tokens", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--from-csv", type=Path, metavar="README.md",
                    help="rewrite the page's ralm_throughput tables from the CSV beside it")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.from_csv:
        log.info("wrote %s", rewrite_readme_from_csv(args.from_csv))
        return
    res = run(args.models.split(","), args.tokens, args.repeat)
    for line in res.summary:
        log.info("%s", line)
    for t, ok, d in res.targets:
        log.info("%s: %s (%s)", t, "met" if ok else "MISSED", d)


if __name__ == "__main__":
    main()
