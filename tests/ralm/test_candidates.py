"""RALM's official candidate rule lives in ralm/candidates.py (issue 31): max(100, 4k) hits
are fetched when titles are forbidden, then the core's title filter keeps the first k."""
from __future__ import annotations

import inspect
from pathlib import Path

from ragrepro.data.records import Passage
from ragrepro.retrieval import base
from ragrepro.retrieval.base import Hit, Retriever
from ragrepro.retrieval.corpus import Corpus
from ralm import candidates

ROOT = Path(__file__).resolve().parents[2]


class Counting(Retriever):
    """Hit i of query q has title f"{q}-{i}"; records how many hits each call asked for."""

    def __init__(self):
        self.corpus, self.name, self.cache = Corpus("toy", [Passage("1", "T", "a")]), "n", False
        self.calls: list[int] = []

    def settings(self):
        return {"retriever": "counting"}

    def _search(self, queries, n):
        self.calls.append(n)
        return [[Hit(f"{q}:{i}", f"{q}-{i}", "t", float(n - i)) for i in range(n)]
                for q in queries]


def test_candidate_count_is_max_100_4k_with_exclusions():
    assert candidates.n_candidates(16, []) == 16
    assert candidates.n_candidates(16, ["t"]) == 100
    assert candidates.n_candidates(25, ["t"]) == 100
    assert candidates.n_candidates(30, ["t"]) == 120


def test_official_search_fetches_the_candidates_then_filters():
    r = Counting()
    [hits] = candidates.search(r, ["q"], 3, ["q-0", "q-2"])
    assert r.calls == [100] and [h.title for h in hits] == ["q-1", "q-3", "q-4"]
    [hits] = candidates.search(r, ["q"], 30, ["q-0"])
    assert r.calls[-1] == 120 and len(hits) == 30 and hits[0].title == "q-1"
    [plain] = candidates.search(r, ["q"], 3)
    assert r.calls[-1] == 3 and [h.title for h in plain] == ["q-0", "q-1", "q-2"]


def test_the_core_retriever_holds_no_candidate_rule():
    source = inspect.getsource(base)
    for name in ("MIN_CANDIDATES", "CANDIDATE_FACTOR", "n_candidates", "max(100", "4 * k"):
        assert name not in source, name
    # RALM's two searches with forbidden titles go through its rule
    for path in ("ralm/sources.py", "ralm/reranker.py"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert "candidates.search(" in text and "exclude_titles=" not in text, path
