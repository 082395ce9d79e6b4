"""Benchmark 3: retrieval over wiki-vital. Queries per second batched vs one at a time (BM25 via
pyserini, dense MiniLM + FAISS; result caches off, so the index is what is measured), and the
index build time from scratch (Lucene index into a temporary folder; dense: encoding every
passage plus the FAISS index).

Dense on 2 CPU cores: encoding all 9,828 passages with MiniLM-L6 is ~27 TFLOP (15+ minutes at
the ~30 GFLOP/s float32 these cores reach under load), too long for a benchmark. When the
corpus embeddings are not cached yet, the dense build time is measured on the first
BENCH_DENSE_SAMPLE passages (default 256) and extrapolated linearly (marked as such), and the
dense queries run against an index of those passages (query encoding dominates a query: a flat
search over 10k 384-d vectors takes about a millisecond).

Environment: BENCH_RETRIEVAL_QUERIES (default 500 batched; 100 one at a time),
BENCH_DENSE_SAMPLE, BENCH_DENSE_BUILD=0 skips the dense build timing.
"""
from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import BenchResult, load_average, markdown_table

log = logging.getLogger(__name__)

K = 16  # RALM's k at paper scale


def pseudo_queries(texts: list[str], n: int, words: int = 32, seed: int = 0) -> list[str]:
    """n spans of `words` words from random passages (like RALM's 32-token prefix queries)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        w = texts[rng.randrange(len(texts))].split()
        start = rng.randrange(max(1, len(w) - words))
        out.append(" ".join(w[start:start + words]))
    return out


def qps(retriever: Any, queries: list[str], n_single: int) -> dict[str, float]:
    retriever.cache = False
    retriever.search(queries[:4], k=K)  # warm up: JVM, model load, index open
    t0 = time.perf_counter()
    retriever.search(queries, k=K)
    batched = time.perf_counter() - t0
    t0 = time.perf_counter()
    for q in queries[:n_single]:
        retriever.search([q], k=K)
    single = time.perf_counter() - t0
    return {"queries_batched": len(queries), "batched_qps": len(queries) / batched,
            "queries_single": n_single, "single_qps": n_single / single,
            "batched_vs_single": (len(queries) / batched) / (n_single / single)}


def _configs() -> tuple[Any, Any, Any]:
    from ragrepro.named_configs import group_config
    from ragrepro.retrieval import build_corpus

    corpus = build_corpus(group_config("corpus", "wiki-vital"))
    return (corpus, group_config("retriever", "bm25"), group_config("retriever", "dense-minilm"))


def bm25_build_seconds(corpus: Any, threads: int) -> float:
    from ragrepro.retrieval.bm25 import build_lucene_index

    tmp = Path(tempfile.mkdtemp(prefix="ragrepro-bench-bm25-"))
    try:
        t0 = time.perf_counter()
        build_lucene_index(corpus, tmp / "index", threads=threads, force=True)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def dense_build_seconds(retriever: Any, corpus: Any) -> float:
    """Encode every passage of `corpus` and build the exact inner-product index (no cache)."""
    import faiss
    import numpy as np

    t0 = time.perf_counter()
    vec = retriever.encode_passages(corpus.passages, progress="bench: encoding wiki-vital")
    index = faiss.IndexFlatIP(vec.shape[1])
    index.add(np.ascontiguousarray(vec, dtype=np.float32))
    return time.perf_counter() - t0


def dense_row(corpus: Any, dense_cfg: Any, queries: list[str], n: int) -> dict[str, Any]:
    from ragrepro.retrieval import Corpus, build_retriever

    full = build_retriever(dense_cfg, corpus)
    cached = (full.embeddings_dir() / "meta.json").exists()
    sample = int(os.environ.get("BENCH_DENSE_SAMPLE", "256"))
    if cached:
        searcher, index_passages = full, len(corpus)
    else:
        sub = Corpus(f"{corpus.name}-bench{sample}", passages=corpus.passages[:sample])
        searcher, index_passages = build_retriever(dense_cfg, sub), sample
    build_s, build_note = None, "skipped"
    if os.environ.get("BENCH_DENSE_BUILD", "1") != "0":
        part = corpus if cached else Corpus(corpus.name, passages=corpus.passages[:sample])
        measured = dense_build_seconds(full, part)
        build_s = measured * len(corpus) / len(part)
        build_note = "measured" if cached else f"extrapolated from {len(part)} passages"
    return {"retriever": "dense minilm-l6 + FAISS flat", "corpus": corpus.name,
            "passages": len(corpus), "k": K, "build_s": build_s, "build_note": build_note,
            "index_passages": index_passages,
            **qps(searcher, queries[: max(4, n // 2)], min(n, 100)),
            "load_avg": load_average()}


def run() -> BenchResult:
    from ragrepro.retrieval import build_retriever

    n = int(os.environ.get("BENCH_RETRIEVAL_QUERIES", "500"))
    corpus, bm25_cfg, dense_cfg = _configs()
    queries = pseudo_queries([p.text for p in corpus.passages], n)
    rows: list[dict[str, Any]] = []
    bm25 = build_retriever(bm25_cfg, corpus)
    build = bm25_build_seconds(corpus, int(bm25_cfg.threads))
    rows.append({"retriever": "bm25 (pyserini)", "corpus": corpus.name, "passages": len(corpus),
                 "k": K, "build_s": build, **qps(bm25, queries, min(n, 100)),
                 "load_avg": load_average()})
    rows.append(dense_row(corpus, dense_cfg, queries, n))
    view = [{"retriever": r["retriever"], "passages": r["passages"],
             "index build (s)": r["build_s"], "build": r.get("build_note", "measured"),
             "searched index (passages)": r.get("index_passages", r["passages"]), "batched q/s": r["batched_qps"],
             "one-at-a-time q/s": r["single_qps"], "batched / single": r["batched_vs_single"]}
            for r in rows]
    summary = [(f"{n} pseudo-queries (32-word passage spans), k={K}, result caches off. "
               f"Build: BM25 = Lucene index from scratch into a temporary folder; dense = "
               f"encoding all passages with MiniLM-L6 + a flat FAISS index."), "",
               *markdown_table(view)]
    return BenchResult("retrieval", rows, summary, [])
