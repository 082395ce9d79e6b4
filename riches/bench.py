"""Index lookup benchmark (a `make bench` hook): time per decoding step per beam and memory
per corpus token, on synthetic and wiki-vital-derived corpora of a given size.

A "decoding step" is what the constraint does for one hypothesis inside a key: enumerate the
allowed next tokens of its current span (`children`) and narrow the span by the chosen token.
Walks follow real keys from a key start, token by token, like a decoder copying a key; the
memo of spans is cleared before every walk (except the key-start span, which decoding
computes once per index), so every step pays for its own lookup.
"""
from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .index import SuffixIndex

log = logging.getLogger(__name__)


def synthetic_keys(n_tokens: int, vocab: int = 49152, mean_len: int = 30,
                   seed: int = 0) -> list[np.ndarray]:
    """Zipf-distributed token ids cut into keys of geometric length: frequent tokens make
    large spans with many distinct continuations, the expensive case."""
    rng = np.random.default_rng(seed)
    toks = (rng.zipf(1.2, size=n_tokens) - 1) % vocab
    cuts = np.cumsum(rng.geometric(1.0 / mean_len, size=n_tokens // mean_len * 2 + 10))
    cuts = cuts[cuts < n_tokens]
    return [k for k in np.split(toks, cuts) if len(k)]


def wiki_vital_keys(n_tokens: int, seed: int = 0, tokenizer: Any = None) -> list[np.ndarray]:
    """wiki-vital sentences tokenised with SmolLM2's tokenizer, repeated (each copy in a new
    shuffled order) until n_tokens: same vocabulary statistics, spans grow with the copies."""
    from ragrepro.data.vital import corpus_passages

    from .constraint import key_token_ids
    from .pipeline import cached_keys

    if tokenizer is None:
        from transformers import AutoTokenizer

        from ragrepro.models.loading import resolve_source

        tokenizer = AutoTokenizer.from_pretrained(resolve_source("embedded:smollm2")[0])
    sents = cached_keys("sentence", corpus_passages()).keys  # pysbd is slow: reuse the cache
    base = [np.asarray(k, dtype=np.int64) for k in key_token_ids(tokenizer, sents)]
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    total = 0
    while total < n_tokens:
        for i in rng.permutation(len(base)):
            out.append(base[i])
            total += len(base[i])
            if total >= n_tokens:
                break
    return out


def time_walks(index: SuffixIndex, keys: list[np.ndarray], n_walks: int = 300,
               max_steps: int = 24, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    start = index.key_start()
    index.children(start)  # once per index, as in decoding
    times: list[float] = []
    distinct: list[int] = []
    probes = [0]
    read_rows = index._next_at

    def counted(rows: np.ndarray, depth: int) -> np.ndarray:
        # the algorithm's cost apart from the memory hierarchy: suffix-array rows read
        probes[0] += int(np.size(rows))
        return read_rows(rows, depth)

    index._next_at = counted  # type: ignore[method-assign]
    try:
        for _ in range(n_walks):
            key = keys[int(rng.integers(len(keys)))]
            index._cache = type(index._cache)({(start.lo, start.hi, start.depth): index.children(start)})
            span = start
            for tok in key[:max_steps]:
                t0 = time.perf_counter()
                ch = index.children(span)
                i = ch.find(int(tok))
                span = type(span)(int(ch.starts[i]), int(ch.ends[i]), span.depth + 1)
                times.append(time.perf_counter() - t0)
                distinct.append(len(ch.tokens))
    finally:
        del index._next_at  # back to the class method
    t = np.asarray(times) * 1e3
    return {"probes_per_step_mean": probes[0] / max(len(times), 1),
            "ms_per_step_mean": float(t.mean()), "ms_per_step_p50": float(np.median(t)),
            "ms_per_step_p95": float(np.percentile(t, 95)), "ms_per_step_max": float(t.max()),
            "distinct_next_mean": float(np.mean(distinct)), "steps_timed": len(times)}


def lookup_benchmark(n_tokens: int, corpus: str = "synthetic", n_walks: int = 300,
                     seed: int = 0, workdir: str | Path | None = None) -> dict[str, Any]:
    """Build an index of about n_tokens tokens (corpus: synthetic | wiki-vital), save it,
    reopen it memory-mapped and time decoding steps. Returns one result row."""
    t0 = time.perf_counter()
    if corpus == "synthetic":
        keys, vocab = synthetic_keys(n_tokens, seed=seed), 49152
    elif corpus == "wiki-vital":
        keys, vocab = wiki_vital_keys(n_tokens, seed=seed), 49152
    else:
        raise ValueError(f"corpus={corpus!r}; use synthetic or wiki-vital")
    t_data = time.perf_counter() - t0
    t0 = time.perf_counter()
    built = SuffixIndex.build(keys, vocab)
    t_build = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        built.save(Path(tmp) / "ix")
        del built
        index = SuffixIndex.load(Path(tmp) / "ix", mmap=True)
        t0 = time.perf_counter()
        index.children(index.root())
        t_root = time.perf_counter() - t0
        walks = time_walks(index, keys, n_walks, seed=seed)
        row = {"corpus": corpus, "n_tokens": index.n, "n_keys": len(keys),
               "bytes_per_token": index.bytes_per_token(),
               "index_mb": (index.text.nbytes + index.sa.nbytes) / 2**20,
               "data_s": t_data, "build_s": t_build, "root_children_s": t_root, **walks}
        del index
    log.info("lookup benchmark %s", row)
    return row
