"""Choosing one document among the top-k retrieved (paper §6; reference §3.5).

Strategies (`ralm.rerank`):
- `none`: no retrieval at all (the "no retrieval" rows).
- `first`: the retriever's top hit (no reranking).
- `random`: uniform among the top k, from a generator seeded by (seed, retrieval index), so a
  resumed run makes the same choices.
- `zeroshot`: the document minimising the NLL of the last s' prefix tokens, each conditioned
  on [doc; earlier prefix] (paper Eq. 6). The scoring LM may differ from the evaluated LM.
- `oracle`: the document minimising the NLL of the actual target tokens (upper bound, Fig. 7).
- `predictive`: the highest score of a trained reranker (§6.2, Eq. 7-8).
- `gold`: no retriever; the evaluated text's own article is the only document (a deliberate
  leak, the mechanism's upper bound; ralm/gold.py).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragrepro.errors import ConfigError, NumericsError

STRATEGIES = ("none", "first", "random", "zeroshot", "oracle", "predictive", "gold")
LM_SCORED = ("zeroshot", "oracle")


def check_strategy(name: str) -> str:
    if name not in STRATEGIES:
        from ragrepro.errors import unknown_name

        raise unknown_name("ralm.rerank strategy", name, STRATEGIES)
    return name


def choose_first(n_docs: int) -> int:
    if n_docs < 1:
        raise ConfigError("no documents to choose from")
    return 0


def choose_random(n_docs: int, seed: int, retrieval_index: int) -> int:
    """Uniform over n_docs; the generator depends only on (seed, retrieval index)."""
    if n_docs < 1:
        raise ConfigError("no documents to choose from")
    rng = np.random.default_rng([int(seed), int(retrieval_index)])
    return int(rng.integers(n_docs))


def choose_min_nll(nll_sums: Sequence[float]) -> int:
    """argmin of summed NLL, first index on ties (torch.argmin's rule in the official code)."""
    arr = np.asarray(nll_sums, dtype=np.float64)
    if arr.size == 0:
        raise ConfigError("no documents to choose from")
    if not np.all(np.isfinite(arr)):
        raise NumericsError(f"non-finite reranking NLL: {arr.tolist()}")
    return int(np.argmin(arr))


def choose_max_score(scores: Sequence[float]) -> int:
    """Eq. 8: the document with the highest reranker score (first on ties)."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.size == 0:
        raise ConfigError("no documents to choose from")
    return int(np.argmax(arr))
