"""Benchmark: recall of the approximate FAISS indexes (IVF-PQ, HNSW) against the exact flat
index, on the embedded wiki-vital corpus with the embedded MiniLM encoder (dense-minilm).

Queries are RALM-style: 32-word spans of the held-out wiki-vital articles (not in the corpus),
so a query's neighbours are related passages, not its own source. The flat index's top 100
per query is the reference; recall@k = |approx top k ∩ flat top k| / k, averaged over
queries (recall@1: the same first passage). Builds use ragrepro/retrieval/faiss_index.py (the
code the retriever runs: same auto parameters, same training sample). One FAISS and one torch
thread. Writes results/retrieval/ann_recall.csv and .md (and the bench section `ann`).

    python -m benchmarks ann            # or: python -m benchmarks.ann_recall

Encoding the corpus once (cached with the retriever's embeddings) takes 5-20 minutes on
2 CPU cores; afterwards the benchmark takes about a minute. Environment: BENCH_ANN_QUERIES
(default 1000).
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import BenchResult, load_average, markdown_table

log = logging.getLogger(__name__)

KS = (1, 10, 100)
# (label, retriever.faiss, search-time overrides): the config defaults (auto), then the
# knobs swept to show the recall / speed trade-off.
CONFIGS: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [
    ({"type": "ivfpq"}, [{"nprobe": 1}, {}, {"nprobe": 32}, {"nprobe": 128}]),
    ({"type": "ivfpq", "m": 96}, [{}, {"nprobe": 32}]),
    ({"type": "hnsw"}, [{"ef_search": 100}, {}, {"ef_search": 512}]),
    ({"type": "hnsw", "hnsw_m": 16}, [{}]),
]


def recall_at(approx: np.ndarray, exact: np.ndarray, k: int) -> float:
    """Mean over queries of |approx[:k] ∩ exact[:k]| / k (ids; -1 never matches)."""
    hits = [len(set(a[:k].tolist()) & set(e[:k].tolist()) - {-1}) for a, e in zip(approx, exact)]
    return float(np.mean(hits)) / k


def held_out_queries(n: int) -> list[str]:
    from ragrepro.data.vital import lm_docs

    from .retrieval import pseudo_queries

    texts = [d.text for d in lm_docs("dev") + lm_docs("test")]
    return pseudo_queries(texts, n, words=32, seed=0)


def vectors(n_queries: int) -> tuple[Any, np.ndarray, np.ndarray, list[Path]]:
    """(retriever, corpus vectors, query vectors, embedding shards) of dense-minilm."""
    from ragrepro.named_configs import group_config
    from ragrepro.retrieval import build_corpus, build_retriever

    corpus = build_corpus(group_config("corpus", "wiki-vital"))
    retriever = build_retriever(group_config("retriever", "dense-minilm"), corpus)
    shards = retriever.corpus_embeddings()
    x = np.ascontiguousarray(np.concatenate([np.load(p) for p in shards]), dtype=np.float32)
    q = retriever.encode_queries(held_out_queries(n_queries))
    return retriever, x, np.ascontiguousarray(q, dtype=np.float32), shards


def measure(spec: Any, x: np.ndarray, q: np.ndarray, shards: list[Path],
            searches: list[dict[str, Any]], exact: np.ndarray) -> list[dict[str, Any]]:
    """Build one index (timed), then search it with each set of search parameters."""
    import dataclasses

    import faiss

    from ragrepro.retrieval.dense import training_sample
    from ragrepro.retrieval.faiss_index import (
        build_flops,
        empty_index,
        set_search_params,
        spec_bytes,
    )

    n, dim = x.shape
    t0 = time.perf_counter()
    index = empty_index(spec, dim)
    if spec.type == "ivfpq":
        index.train(training_sample(shards, int(spec.train_size)))
    index.add(x)
    build_s = time.perf_counter() - t0
    size = len(faiss.serialize_index(index))
    rows = []
    for override in searches:
        s = dataclasses.replace(spec, **override)
        set_search_params(index, s, max(KS))
        t0 = time.perf_counter()
        _, ids = index.search(q, max(KS))
        search_s = time.perf_counter() - t0
        rows.append({"index": s.type, "params": s.label(), "build": str(s.build_params()),
                     "corpus": "wiki-vital", "n": n,
                     "dim": dim, "queries": len(q),
                     **{f"recall@{k}": recall_at(ids, exact, k) for k in KS},
                     "build_s": build_s, "query_ms": 1000 * search_s / len(q),
                     "bytes": size, "bytes_formula": spec_bytes(s, n, dim),
                     "bytes_per_vector": size / n,
                     "build_gflops": build_flops(s, n, dim) / 1e9,
                     "build_gflop_per_s": build_flops(s, n, dim) / 1e9 / build_s,
                     "load_avg": load_average()})
    return rows


def run() -> BenchResult:
    import faiss
    import torch

    from ragrepro.paths import results_dir
    from ragrepro.retrieval.faiss_index import resolve_spec

    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    _, x, q, shards = vectors(int(os.environ.get("BENCH_ANN_QUERIES", "1000")))
    n, dim = x.shape
    exact = _flat_ids(x, q)
    rows = measure(resolve_spec({"type": "flat"}, n, dim), x, q, shards, [{}], exact)
    for raw, searches in CONFIGS:
        rows += measure(resolve_spec(raw, n, dim, "wiki-vital"), x, q, shards, searches, exact)
    write(rows, results_dir() / "retrieval")
    view = _view(rows)
    summary = [_note(n, dim, len(q)), "", *markdown_table(view)]
    return BenchResult("ann", rows, summary, [])


def _flat_ids(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    import faiss

    index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return index.search(q, max(KS))[1]


def _note(n: int, dim: int, queries: int) -> str:
    return (f"wiki-vital: {n:,} passages, dense-minilm ({dim}-d, cosine); {queries:,} queries "
            f"= 32-word spans of held-out articles; recall@k against the exact flat index; "
            f"one FAISS thread; query ms = batched search time per query (encoding excluded); "
            f"bytes = FAISS's serialised index (formula: ragrepro/retrieval/faiss_index.py).")


def _view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": r["params"], **{f"recall@{k}": r[f"recall@{k}"] for k in KS},
             "build s": r["build_s"], "query ms": r["query_ms"],
             "MB": r["bytes"] / 2**20, "formula MB": r["bytes_formula"] / 2**20,
             "bytes/vector": r["bytes_per_vector"]} for r in rows]


def write(rows: list[dict[str, Any]], folder: Path) -> None:
    """results/retrieval/ann_recall.csv (every measurement) and .md (the table)."""
    from ragrepro.io import atomic_write_text, write_rows_csv
    from ragrepro.metadata import git_state

    folder.mkdir(parents=True, exist_ok=True)
    write_rows_csv(folder / "ann_recall.csv", rows)
    n, dim, queries = rows[0]["n"], rows[0]["dim"], rows[0]["queries"]
    lines = ["# Approximate dense indexes vs flat: recall on wiki-vital", "",
             (f"Generated by `python -m benchmarks ann` ({time.strftime('%Y-%m-%d')}, git "
             f"{git_state().get('git_commit', '')[:10]}, load average "
             f"{rows[-1]['load_avg']:.1f})."), "", _note(n, dim, queries), "",
             *markdown_table(_view(rows)), "",
             ("Build work (the formulas `ragrepro plan` uses) and the rate it ran at here, one "
             "thread:"), "",
             *markdown_table(list({r["build"]: {"index (build parameters)": r["build"],
                                                "build s": r["build_s"],
                                                "build GFLOP": r["build_gflops"],
                                                "GFLOP/s": r["build_gflop_per_s"]}
                                   for r in rows if r["build_gflops"]}.values())), ""]
    atomic_write_text(folder / "ann_recall.md", "\n".join(lines))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    result = run()
    print("\n".join(result.summary))
