"""Build (or warm) a retriever's index over a corpus, deliberately, from the configs.

    python scripts/build_index.py corpus=wiki-vital retriever=bm25
    python scripts/build_index.py corpus=wiki-vital retriever=dense-minilm
    # paper scale: write the index where a config's retriever.index / index_path points
    python scripts/build_index.py corpus=wikipedia-dpr corpus.path=/data/psgs_w100.tsv \
        retriever=contriever device=cuda --out /data/indexes/contriever-dpr.faiss
    python scripts/build_index.py corpus=wikipedia-dpr corpus.path=/data/psgs_w100.tsv \
        retriever=bm25 --out /data/indexes/bm25-dpr-lucene
    # measure index build time and queries/s
    python scripts/build_index.py corpus=wiki-vital retriever=bm25 --bench 1000

Without --out, the index goes to the content-addressed cache (cache_dir()) where retrievers
built with the same settings find it. Trailing key=value arguments are Hydra overrides of
conf/config.yaml.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragrepro.errors import ConfigError, RagreproError
from ragrepro.paths import CONF_DIR

log = logging.getLogger("build_index")


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)


def bench_queries(corpus, n: int, seed: int = 0) -> list[str]:
    """n pseudo-queries: 32-word spans of random passages (like RALM's 32-token prefixes)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = corpus[rng.randrange(len(corpus))].text.split()
        start = rng.randrange(max(1, len(words) - 32))
        out.append(" ".join(words[start:start + 32]))
    return out


def benchmark(retriever, corpus, n: int, k: int = 16) -> dict:
    """Queries/s batched vs one at a time (caching off, so the index is what is measured)."""
    retriever.cache = False
    queries = bench_queries(corpus, n)
    retriever.search(queries[:4], k=k)  # warm up (JVM, model load, index open)
    t = time.perf_counter()
    retriever.search(queries, k=k)
    batched = time.perf_counter() - t
    single_n = min(n, 200)
    t = time.perf_counter()
    for q in queries[:single_n]:
        retriever.search([q], k=k)
    single = time.perf_counter() - t
    return {"queries": n, "k": k, "batched_seconds": round(batched, 3),
            "batched_qps": round(n / batched, 1), "single_queries": single_n,
            "single_seconds": round(single, 3), "single_qps": round(single_n / single, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the index here (Lucene folder / FAISS file)")
    parser.add_argument("--force", action="store_true", help="rebuild even if it exists")
    parser.add_argument("--bench", type=int, default=0, metavar="N",
                        help="after building, time N queries batched and one at a time")
    parser.add_argument("--json", help="write the timings to this JSON file")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # CPU-feature probing noise
    try:
        cfg = compose(args.overrides)
        from ragrepro.retrieval import build_corpus, build_retriever
        from ragrepro.retrieval.bm25 import BM25Retriever, build_lucene_index
        from ragrepro.retrieval.dense import DenseRetriever

        t = time.perf_counter()
        corpus = build_corpus(cfg.corpus)
        report: dict = {"corpus": cfg.corpus.name, "passages": len(corpus),
                        "corpus_seconds": round(time.perf_counter() - t, 2)}
        retriever = build_retriever(cfg.retriever, corpus)
        t = time.perf_counter()
        if isinstance(retriever, BM25Retriever):
            if retriever.index not in (None, "") and not args.out:
                raise ConfigError(f"retriever.index={retriever.index!r} is an existing or "
                                  f"prebuilt index: nothing to build. Use --out PATH to build "
                                  f"a new index of the corpus.")
            path = build_lucene_index(corpus, Path(args.out) if args.out else None,
                                      threads=retriever.threads, force=args.force)
            if args.out:
                retriever.index = str(path)
            report["index"] = str(path)
        elif isinstance(retriever, DenseRetriever):
            if args.force:
                import shutil

                shutil.rmtree(retriever.embeddings_dir(), ignore_errors=True)
            retriever.corpus_embeddings()
            report["embeddings"] = str(retriever.embeddings_dir())
            if args.out:
                report["index"] = str(retriever.save_index(args.out))
                retriever.index_path = args.out
        else:
            raise ConfigError(f"Don't know how to build an index for {type(retriever).__name__}.")
        report["build_seconds"] = round(time.perf_counter() - t, 2)
        log.info("Index ready in %.1f s: %s", report["build_seconds"],
                 report.get("index") or report.get("embeddings"))
        if args.bench:
            report["bench"] = benchmark(retriever, corpus, args.bench)
            log.info("Benchmark: %s", report["bench"])
        report["settings"] = retriever.settings()
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        log.info("%s", json.dumps({k: v for k, v in report.items() if k != "settings"}))
    except RagreproError as e:
        log.error("%s", e)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
