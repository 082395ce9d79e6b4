"""Benchmark: recall of the approximate FAISS indexes (IVF-PQ with and without exact
re-ranking, HNSW) against exact search, on the embedded wiki-vital corpus with the embedded
MiniLM encoder (dense-minilm), and on 1M synthetic clustered vectors.

wiki-vital queries are RALM-style: 32-word spans of the held-out wiki-vital articles (not in
the corpus), so a query's neighbours are related passages, not its own source. The synthetic
corpus (`synthetic_vectors`) is a two-level Gaussian mixture in 384 dimensions whose scores
fall off with rank about as wiki-vital's do; its queries are further draws from the same
mixture. The reference is exact search (`faiss_index.exact_search`, blocked numpy over the
memory-mapped vectors); recall@k = |approx top k ∩ exact top k| / k, averaged over queries
(recall@1: the same first passage), each k searched on its own (re-ranking fetches refine x
k candidates). Builds and searches use ragrepro/retrieval/faiss_index.py (the code the
retriever runs: same auto parameters, same training sample, the same re-ranking over the
same kind of memory-mapped float store). One FAISS and one torch thread. Writes
results/retrieval/ann_recall.csv and .md (and the bench section `ann`); each corpus's run
replaces only its own rows.

    python -m benchmarks ann                      # wiki-vital (or: python -m benchmarks.ann_recall)
    python -m benchmarks.ann_recall --synthetic 1000000   # the 1M-vector rows (~40 min, < 3 GB)

Encoding the corpus once (cached with the retriever's embeddings) takes 5-20 minutes on
2 CPU cores; afterwards the wiki-vital benchmark takes a few minutes. Environment:
BENCH_ANN_QUERIES (default 1000).
"""
from __future__ import annotations

import argparse
import csv
import dataclasses
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.retrieval.faiss_index import recall_at

from .common import BenchResult, load_average, markdown_table

log = logging.getLogger(__name__)

KS = (1, 10, 100)
# (retriever.faiss, search-time overrides): the config defaults (auto), then the knobs swept
# to show the recall / speed trade-off. The `refine: auto` search parameters for the corpus
# (what `type: auto` uses above its flat limit) are added to the auto ivfpq's sweep when
# missing; rows with them are marked as the default (`mark_defaults`).
WIKI_CONFIGS: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "ivfpq"}, [{"nprobe": 1}, {}, {"nprobe": 32}, {"nprobe": 128},
                         {"refine": 2, "nprobe": 64}, {"refine": 4, "nprobe": 64},
                         {"refine": 8, "nprobe": 16}, {"refine": 8, "nprobe": 32},
                         {"refine": 8, "nprobe": 64}, {"refine": 16, "nprobe": 64}]),
    ({"type": "ivfpq", "m": 96}, [{}, {"nprobe": 32}]),
    ({"type": "hnsw"}, [{"ef_search": 100}, {}, {"ef_search": 512}]),
    ({"type": "hnsw", "hnsw_m": 16}, [{}]),
]
SYNTHETIC_CONFIGS: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "ivfpq"}, [{}, {"nprobe": 250}, {"nprobe": 1000},
                         {"refine": 4, "nprobe": 62}, {"refine": 8, "nprobe": 62},
                         {"refine": 16, "nprobe": 62}, {"refine": 8, "nprobe": 125},
                         {"refine": 16, "nprobe": 125}, {"refine": 8, "nprobe": 250},
                         {"refine": 8, "nprobe": 500}, {"refine": 4, "nprobe": 1000},
                         {"refine": 8, "nprobe": 1000}, {"refine": 8, "nprobe": 2000}]),
]
# The synthetic mixture: TOPICS unit vectors, CENTRES drawn around them (spread
# CENTRE_SPREAD), each point a centre plus a component in its topic's rank-RANK subspace
# (spread LOCAL_SPREAD) plus isotropic noise (NOISE); then normalised. The low-rank part
# gives the steady fall of similarity with rank that real embeddings show (an isotropic
# mixture puts a point's 100 neighbours at nearly the same distance).
DIM, TOPICS, CENTRES, RANK = 384, 1_000, 10_000, 16
CENTRE_SPREAD, LOCAL_SPREAD, NOISE = 0.8, 0.6, 0.3
SHARD_ROWS = 100_000


@dataclass
class Data:
    """A corpus's vectors for the benchmark: its float store (shards on disk) and queries."""

    corpus: str
    shards: list[Path]
    queries: np.ndarray
    note: str
    index_cache: Path | None = None  # keep trained indexes here (a 1M build takes minutes)


# ---- corpora -------------------------------------------------------------------------------
def held_out_queries(n: int) -> list[str]:
    from ragrepro.data.vital import lm_docs

    from .retrieval import pseudo_queries

    texts = [d.text for d in lm_docs("dev") + lm_docs("test")]
    return pseudo_queries(texts, n, words=32, seed=0)


def wiki_vital(n_queries: int) -> Data:
    """dense-minilm's cached wiki-vital embeddings and held-out RALM-style queries."""
    from ragrepro.named_configs import group_config
    from ragrepro.retrieval import build_corpus, build_retriever

    corpus = build_corpus(group_config("corpus", "wiki-vital"))
    retriever = build_retriever(group_config("retriever", "dense-minilm"), corpus)
    shards = retriever.corpus_embeddings()
    q = retriever.encode_queries(held_out_queries(n_queries))
    note = (f"wiki-vital: {len(corpus):,} passages, dense-minilm (384-d, cosine); {len(q):,} "
            f"queries = 32-word spans of held-out articles")
    return Data("wiki-vital", shards, np.ascontiguousarray(q, dtype=np.float32), note)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def synthetic_vectors(n: int, rng: np.random.Generator, topics: np.ndarray, bases: np.ndarray,
                      centres: np.ndarray, centre_topic: np.ndarray) -> np.ndarray:
    """n points of the mixture (see the constants above), float32, normalised."""
    label = rng.integers(0, len(centres), n)
    x = centres[label] + NOISE * rng.standard_normal((n, DIM), dtype=np.float32) / np.sqrt(DIM)
    w = LOCAL_SPREAD * rng.standard_normal((n, RANK), dtype=np.float32)
    topic = centre_topic[label]
    order = np.argsort(topic, kind="stable")
    for group in np.split(order, np.flatnonzero(np.diff(topic[order])) + 1):
        if group.size:  # one (points x RANK) @ (RANK x d) product per topic: no n x RANK x d
            x[group] += w[group] @ bases[topic[group[0]]]
    return _unit(x).astype(np.float32)


def synthetic(n: int, n_queries: int, folder: Path, seed: int = 0) -> Data:
    """n synthetic vectors in .npy shards of SHARD_ROWS (written once, then reused) and
    n_queries held-out draws from the same mixture."""
    rng = np.random.default_rng(seed)
    topics = _unit(rng.standard_normal((TOPICS, DIM), dtype=np.float32))
    bases = rng.standard_normal((TOPICS, RANK, DIM), dtype=np.float32) / np.sqrt(DIM)
    centre_topic = rng.integers(0, TOPICS, CENTRES)
    centres = _unit(topics[centre_topic] + CENTRE_SPREAD * rng.standard_normal(
        (CENTRES, DIM), dtype=np.float32) / np.sqrt(DIM)).astype(np.float32)
    parts = (topics, bases, centres, centre_topic)
    folder.mkdir(parents=True, exist_ok=True)
    shards = []
    for i, start in enumerate(range(0, n, SHARD_ROWS)):
        path = folder / f"shard-{i:05d}.npy"
        rows = min(SHARD_ROWS, n - start)
        if not path.exists():  # each shard from its own seeded stream: reruns reuse them
            x = synthetic_vectors(rows, np.random.default_rng([seed, 1, i]), *parts)
            np.save(path.with_name(path.name + ".tmp.npy"), x)
            os.replace(path.with_name(path.name + ".tmp.npy"), path)
        shards.append(path)
    q = synthetic_vectors(n_queries, np.random.default_rng([seed, 2]), *parts)
    note = (f"synthetic: {n:,} vectors, {DIM}-d, normalised: {CENTRES:,} centres around "
            f"{TOPICS:,} random unit topics (spread {CENTRE_SPREAD}), each point = centre + "
            f"a N(0, {LOCAL_SPREAD}²) component in its topic's random rank-{RANK} subspace + "
            f"isotropic noise of norm ~{NOISE}; {n_queries:,} queries = further draws from "
            f"the same mixture (benchmarks/ann_recall.py, `synthetic`)")
    return Data(f"synthetic-{n // 1000}k", shards, q, note, index_cache=folder)


# ---- measuring -----------------------------------------------------------------------------
def build(spec: Any, data: Data) -> tuple[Any, float]:
    """The index of `spec` over the store (trained on the retriever's seeded sample, vectors
    added shard by shard from the memory maps) and its build seconds; with
    data.index_cache, a trained index is kept there with its build time and reused."""
    import json

    import faiss

    from ragrepro.hashing import hash_obj
    from ragrepro.retrieval.dense import training_sample
    from ragrepro.retrieval.faiss_index import empty_index

    cached = None
    if data.index_cache is not None and spec.type != "flat":
        cached = data.index_cache / f"index-{hash_obj(spec.build_params(), 12)}.faiss"
        if cached.exists():
            meta = json.loads(cached.with_suffix(".json").read_text())
            return faiss.read_index(str(cached)), float(meta["build_s"])
    dim = int(np.load(data.shards[0], mmap_mode="r").shape[1])
    t0 = time.perf_counter()
    index = empty_index(spec, dim)
    if spec.type == "ivfpq":
        index.train(training_sample(data.shards, int(spec.train_size)))
    for path in data.shards:
        index.add(np.ascontiguousarray(np.load(path, mmap_mode="r"), dtype=np.float32))
    seconds = time.perf_counter() - t0
    if cached is not None:
        faiss.write_index(index, str(cached))
        cached.with_suffix(".json").write_text(json.dumps({"build_s": seconds}))
    return index, seconds


def search(index: Any, spec: Any, store: Any, q: np.ndarray, k: int) -> np.ndarray:
    """The ids the retriever would return: index hits, re-ranked exactly when refine is set."""
    from ragrepro.retrieval import faiss_index as fi

    fetch = fi.refine_candidates(spec, k, index.ntotal)
    fi.set_search_params(index, spec, fetch)
    _, ids = index.search(q, fetch)
    return fi.refine(store, q, ids, k)[1] if spec.refine else ids


def measure(spec: Any, data: Data, searches: list[dict[str, Any]],
            exact: np.ndarray) -> list[dict[str, Any]]:
    """Build one index (timed), then search it with each set of search parameters."""
    import faiss

    from ragrepro.retrieval import faiss_index as fi

    store = fi.FloatStore(data.shards)
    n, dim = len(store), store.dim
    index, build_s = build(spec, data)
    size = len(faiss.serialize_index(index))
    rows = []
    for override in searches:
        s = dataclasses.replace(spec, **override)
        recalls, search_s = {}, 0.0
        for k in KS:
            t0 = time.perf_counter()
            ids = search(index, s, store, data.queries, k)
            search_s = time.perf_counter() - t0  # the last: k = 100
            recalls[f"recall@{k}"] = recall_at(ids, exact, k)
        store_bytes = fi.flat_bytes(n, dim) if s.refine else 0
        rows.append({"index": s.type, "params": s.label(), "build": str(s.build_params()),
                     "corpus": data.corpus, "n": n, "dim": dim, "queries": len(data.queries),
                     **recalls,
                     "build_s": build_s, "query_ms": 1000 * search_s / len(data.queries),
                     "bytes": size, "bytes_formula": fi.spec_bytes(s, n, dim),
                     "bytes_per_vector": size / n,
                     "disk_bytes_per_vector": (size + store_bytes) / n if s.type != "flat"
                     else 0.0,
                     "build_gflops": fi.build_flops(s, n, dim) / 1e9,
                     "build_gflop_per_s": fi.build_flops(s, n, dim) / 1e9 / build_s,
                     "load_avg": load_average(), "date": time.strftime("%Y-%m-%d"),
                     "git": _git()})
    return rows


def exact_reference(data: Data) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact top 100 of every query (blocked numpy over the memory-mapped store), and its
    cost: what the recall probe pays per probe vector (docs/performance.md)."""
    from ragrepro.retrieval import faiss_index as fi

    store = fi.FloatStore(data.shards)
    t0 = time.perf_counter()
    _, ids = fi.exact_search(store, data.queries, max(KS))
    seconds = time.perf_counter() - t0
    flops = 2.0 * len(data.queries) * len(store) * store.dim
    return ids, {"index": "exact", "params": "exact (numpy, blocked over the mmap store)",
                 "build": "", "corpus": data.corpus, "n": len(store), "dim": store.dim,
                 "queries": len(data.queries),
                 **{f"recall@{k}": 1.0 for k in KS}, "build_s": 0.0,
                 "query_ms": 1000 * seconds / len(data.queries), "bytes": 0,
                 "bytes_formula": 0.0, "bytes_per_vector": 0.0,
                 "disk_bytes_per_vector": 4.0 * store.dim, "build_gflops": 0.0,
                 "build_gflop_per_s": flops / 1e9 / seconds, "load_avg": load_average(),
                 "date": time.strftime("%Y-%m-%d"), "git": _git()}


def default_spec(n: int, dim: int) -> Any:
    """`refine: auto` at this corpus size: what `type: auto` runs above its flat limit."""
    from ragrepro.retrieval.faiss_index import resolve_spec

    return resolve_spec({"type": "ivfpq", "refine": "auto"}, n, dim)


def with_default(raw: dict[str, Any], searches: list[dict[str, Any]], n: int,
                 dim: int) -> list[dict[str, Any]]:
    """The sweep of the auto ivfpq, with the default's search parameters when missing."""
    spec = default_spec(n, dim)
    own = {"refine": spec.refine, "nprobe": spec.nprobe}
    if raw != {"type": "ivfpq"} or own in searches:
        return searches
    return [*searches, own]


def mark_defaults(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`default` = the row's index is `refine: auto` at its corpus size, with the rules as
    they are now (so a changed rule re-marks the rows already measured)."""
    return [{**r, "default": r["index"] == "ivfpq"
             and r["params"] == default_spec(int(r["n"]), int(r["dim"])).label()} for r in rows]


def measure_corpus(data: Data, configs: list[tuple[dict[str, Any], list[Any]]],
                   flat: bool = True) -> list[dict[str, Any]]:
    import faiss
    import torch

    from ragrepro.retrieval.faiss_index import FloatStore, resolve_spec

    faiss.omp_set_num_threads(1)
    torch.set_num_threads(1)
    store = FloatStore(data.shards)
    n, dim = len(store), store.dim
    exact, exact_row = exact_reference(data)
    rows = [exact_row]
    if flat:  # FAISS's exact index: its speed beside the numpy reference
        rows += measure(resolve_spec({"type": "flat"}, n, dim), data, [{}], exact)
    for raw, searches in configs:
        log.info("%s: building %s", data.corpus, raw)
        rows += measure(resolve_spec(raw, n, dim, data.corpus), data,
                        with_default(raw, searches, n, dim), exact)
    return [{**r, "note": data.note} for r in rows]


def run() -> BenchResult:
    """wiki-vital (the bench suite's `ann`); the synthetic rows already in the CSV stay."""
    from ragrepro.paths import results_dir

    data = wiki_vital(int(os.environ.get("BENCH_ANN_QUERIES", "1000")))
    rows = measure_corpus(data, WIKI_CONFIGS)
    folder = results_dir() / "retrieval"
    write(rows, folder)
    summary = [data.note, "", *markdown_table(_view(mark_defaults(rows)))]
    return BenchResult("ann", rows, summary, [])


def run_synthetic(n: int, n_queries: int) -> list[dict[str, Any]]:
    """The synthetic rows (vectors cached under the ragrepro cache, ~1.5 GB per 1M)."""
    from ragrepro.paths import cache_dir, results_dir

    data = synthetic(n, n_queries, cache_dir() / "bench" / f"ann-synthetic-{n}")
    rows = measure_corpus(data, SYNTHETIC_CONFIGS)
    write(rows, results_dir() / "retrieval")
    return rows


# ---- writing -------------------------------------------------------------------------------
def _git() -> str:
    from ragrepro.metadata import git_state

    return str(git_state().get("git_commit", ""))[:10]


def _view(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"index": r["params"] + (" **(default)**" if _true(r["default"]) else ""),
             **{f"recall@{k}": r[f"recall@{k}"] for k in KS},
             "build s": r["build_s"], "query ms": r["query_ms"],
             "RAM B/vector": r["bytes_per_vector"],
             "disk B/vector": r["disk_bytes_per_vector"],
             "MB": r["bytes"] / 2**20, "formula MB": r["bytes_formula"] / 2**20}
            for r in rows]


def _true(value: Any) -> bool:
    return value is True or str(value) == "True"


def _number(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


NOTE = ("Recall@k against exact search; one FAISS thread; query ms = batched search time per "
        "query at k = 100 (encoding excluded; re-ranking included, its float store in the page "
        "cache); RAM B/vector = FAISS's serialised index; disk B/vector = the index file plus, "
        "with refine, the float store it reads (the embeddings, kept anyway); formula: "
        "ragrepro/retrieval/faiss_index.py. The `exact` row is the reference, its query ms the "
        "cost of one probe vector of the recall probe.")


def write(rows: list[dict[str, Any]], folder: Path) -> None:
    """results/retrieval/ann_recall.csv (every measurement; these rows replace their corpus's
    earlier ones) and .md (the tables)."""
    from ragrepro.io import atomic_write_text, write_rows_csv

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ann_recall.csv"
    mine = {r["corpus"] for r in rows}
    kept = [r for r in read_rows(path) if r.get("corpus") not in mine]
    every = sorted(mark_defaults(kept + rows), key=lambda r: int(r["n"]))  # wiki-vital first
    keys = list(dict.fromkeys(k for r in every for k in r))
    write_rows_csv(path, [{k: r.get(k, "") for k in keys} for r in every])
    atomic_write_text(folder / "ann_recall.md", "\n".join(render(every)))


def render(rows: list[dict[str, Any]]) -> list[str]:
    corpora = list(dict.fromkeys(r["corpus"] for r in rows))
    lines = ["# Approximate dense indexes vs exact search: recall", "",
             ("Generated by `python -m benchmarks ann` (wiki-vital) and `python -m "
             "benchmarks.ann_recall --synthetic 1000000`."), "", NOTE, ""]
    for corpus in corpora:
        mine = [r for r in rows if r["corpus"] == corpus]
        first = mine[0]
        lines += [f"## {corpus}", "", f"{first['note']}.", "",
                  (f"Measured {first['date']}, git {first['git']}, load average "
                  f"{float(mine[-1]['load_avg']):.1f}."), "", *markdown_table(_view(mine)), ""]
    lines += ["## Build rates", "",
              ("Build work (the formulas `ragrepro plan` uses) and the rate it ran at here, one "
              "thread:"), "",
              *markdown_table(list({(r["corpus"], r["build"]): {
                  "corpus": r["corpus"], "index (build parameters)": r["build"],
                  "build s": r["build_s"], "build GFLOP": r["build_gflops"],
                  "GFLOP/s": r["build_gflop_per_s"]}
                  for r in rows if float(r["build_gflops"] or 0)}.values())), "",
              "## Defaults", "",
              "`refine: auto` (and `type: auto` above its flat limit) at each corpus size:", "",
              *markdown_table([{"corpus": r["corpus"], "n": r["n"], "default": r["params"],
                                **{f"recall@{k}": r[f"recall@{k}"] for k in KS},
                                "query ms": r["query_ms"],
                                "RAM B/vector": r["bytes_per_vector"],
                                "disk B/vector": r["disk_bytes_per_vector"]}
                               for r in rows if _true(r["default"])]), ""]
    return lines


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--synthetic", type=int, default=0, metavar="N",
                        help="measure N synthetic vectors instead of wiki-vital")
    parser.add_argument("--queries", type=int, default=1000)
    args = parser.parse_args()
    if args.synthetic:
        rows = run_synthetic(args.synthetic, args.queries)
        print("\n".join(markdown_table(_view(mark_defaults(rows)))))
    else:
        print("\n".join(run().summary))


if __name__ == "__main__":
    main()
