"""Sharded dense corpus encoding: launcher jobs encode parts `shard=i/n` of the corpus in
parallel into the shared embedding cache, then one `shard=merge` job joins them into one
FAISS index (the same index, vector for vector, as encoding in one process). The merge builds
the index type of `retriever.faiss` (flat, or an IVF-PQ trained on a seeded sample of all the
parts, or HNSW; GPU FAISS when installed) and writes it to `index_out`.

    ragrepro -m experiment=core/encode_shards shard=0/4,1/4,2/4,3/4 hydra/launcher=slurm
    ragrepro experiment=core/encode_shards shard=merge index_out=/shared/idx/minilm.faiss
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..deferred import Deferred
from ..errors import ConfigError
from ..pipeline import Result
from ..shards import parse_shard  # one parser for encode parts and cell shards
from ..tracking import Run
from .corpus import Corpus, corpus_from_passages
from .dense import DenseRetriever, part_files  # noqa: F401  (importable here as before)

log = logging.getLogger(__name__)


def dense_retriever(retriever: Deferred, corpus: Corpus, first_passages: int | None,
                    shard_size: int) -> DenseRetriever:
    """The dense retriever over the corpus (or its first N passages), writing files of
    `shard_size` passages."""
    if first_passages:  # a deterministic prefix, for tests and trial runs (part of the run id)
        corpus = corpus_from_passages(f"{corpus.name}-first{int(first_passages)}",
                                      corpus.passages[:int(first_passages)])
    built = retriever.build(corpus=corpus)
    if not isinstance(built, DenseRetriever):
        raise ConfigError(f"experiment=core/encode_shards encodes with a dense retriever; "
                          f"retriever={retriever.name!r} is not one. Use e.g. "
                          f"retriever=dense-minilm or retriever=contriever.")
    built.shard_size = int(shard_size)
    return built


def run(run: Run, *, corpus: Corpus, retriever: Deferred, shard: str, index_out: str | None,
        first_passages: int | None, shard_size: int) -> Result:
    """Encode part `shard` (i/n) of the corpus, or merge the parts (`shard=merge`)."""
    dense = dense_retriever(retriever, corpus, first_passages, shard_size)
    settings = {"shard": str(shard), "corpus": dense.corpus.name,
                "retriever": dense.name, "shard_size": dense.shard_size}
    if str(shard) == "merge":
        return Result(metrics=_merge(dense, index_out), settings=settings)
    part, parts = parse_shard(str(shard))
    with run.timed("encode"):
        files = dense.encode_part(part, parts)
    n = sum(int(np.load(p, mmap_mode="r").shape[0]) for p in files)  # vectors on disk
    return Result(metrics={"passages": n, "files": len(files)},
                  settings=settings, extra={"embeddings": str(dense.embeddings_dir())})


def _merge(retriever: DenseRetriever, index_out: str | None) -> dict:
    missing = retriever.missing_shards()
    if missing:
        raise ConfigError(f"Cannot merge: embedding files {missing} of "
                          f"{retriever.embeddings_dir()} are missing. Rerun the shard jobs "
                          f"(finished ones are skipped), e.g. `ragrepro -m "
                          f"experiment=core/encode_shards shard=0/N,...,N-1/N` with the same "
                          f"settings.")
    out = index_out or str(retriever.embeddings_dir() / "index.faiss")
    path = retriever.save_index(Path(out))
    log.info("Merged %d embedding files into %s", len(retriever.shard_paths()), path)
    return {"ntotal": len(retriever.corpus), "files": len(retriever.shard_paths()),
            "index": str(path), "faiss_index": retriever.index_spec().label()}
