"""The official In-Context RALM candidate rule: with a forbidden-titles list, the official
code asks BM25 for max(100, 4k) hits, drops the forbidden ones and keeps the first k allowed
(fewer than k can remain). The core's retriever filters titles from whatever number of hits
its caller asks for (ragrepro.retrieval.base `fetch`); this module is that number for RALM."""
from __future__ import annotations

from collections.abc import Collection, Sequence

from ragrepro.retrieval.base import Hit, Retriever

MIN_CANDIDATES = 100
CANDIDATE_FACTOR = 4


def n_candidates(k: int, exclude_titles: Collection[str]) -> int:
    """How many hits to fetch before filtering: k, or max(100, 4k) with a forbidden list."""
    return max(MIN_CANDIDATES, CANDIDATE_FACTOR * k) if exclude_titles else k


def search(retriever: Retriever, queries: Sequence[str], k: int,
           exclude_titles: Collection[str] = ()) -> list[list[Hit]]:
    """Up to k hits per query after the forbidden titles, fetched as the official code does."""
    return retriever.search(list(queries), k, exclude_titles=exclude_titles,
                            fetch=n_candidates(k, exclude_titles))
