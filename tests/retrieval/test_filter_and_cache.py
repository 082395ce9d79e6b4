"""The forbidden-title filter and the on-disk result cache, on a deterministic fake retriever
so the arithmetic is checked without an index (RALM's official candidate count:
tests/ralm/test_candidates.py)."""
from __future__ import annotations

import unicodedata

import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.retrieval.base import Hit, Retriever, cache_path_of, fetch_count, filter_titles
from ragrepro.retrieval.corpus import Corpus

EVA_NFC = unicodedata.normalize("NFC", "Éva Gauthier")
EVA_NFD = unicodedata.normalize("NFD", "Éva Gauthier")


def _hits(titles):
    return [Hit(pid=str(i), title=t, text=f"text {i}", score=10.0 - i) for i, t in enumerate(titles)]


def test_nfc_and_nfd_spellings_are_the_same_title():
    assert EVA_NFC != EVA_NFD
    hits = _hits([EVA_NFD, "A", EVA_NFC, "B", "C"])
    for banned in ([EVA_NFC], [EVA_NFD]):
        kept = filter_titles(hits, banned, k=10)
        assert [h.title for h in kept] == ["A", "B", "C"]


def test_filter_keeps_first_k_allowed_in_order_and_may_return_fewer():
    hits = _hits(["X", "A", "X", "B", "C", "D"])
    assert [h.pid for h in filter_titles(hits, {"X"}, k=2)] == ["1", "3"]
    assert [h.title for h in filter_titles(hits, {"A", "B", "C", "D"}, k=3)] == ["X", "X"]


def test_fetch_is_k_unless_the_caller_asks_for_more():
    assert fetch_count(16, None) == 16
    assert fetch_count(16, 100) == 100
    with pytest.raises(ConfigError, match="fetch=3 is smaller than k=4"):
        fetch_count(4, 3)


class FakeRetriever(Retriever):
    """Hit i of query q has title f"{q}-{i}" and score n - i; k1 only enters settings."""

    def __init__(self, corpus, k1=0.9):
        self.corpus, self.name, self.k1 = corpus, "fake", k1
        self.calls: list[tuple[list[str], int]] = []

    def settings(self):
        return {"retriever": "fake", "k1": self.k1}

    def _search(self, queries, n):
        self.calls.append((list(queries), n))
        return [[Hit(f"{q}:{i}", f"{q}-{i}", "t", float(n - i)) for i in range(n)] for q in queries]


def _corpus(text="a"):
    return Corpus("toy", [Passage("1", "T", text)])


def test_search_fetches_candidates_then_filters():
    r = FakeRetriever(_corpus())
    [hits] = r.search(["q"], k=3, exclude_titles=["q-0", "q-2"], fetch=100)
    assert r.calls == [(["q"], 100)]
    assert [h.title for h in hits] == ["q-1", "q-3", "q-4"]
    # without `fetch` the filter works on the first k hits: fewer than k can remain
    [few] = r.search(["q"], k=3, exclude_titles=["q-0", "q-2"])
    assert r.calls[-1] == (["q"], 3) and [h.title for h in few] == ["q-1"]
    [plain] = r.search(["q"], k=3)
    assert r.calls[-1] == (["q"], 3) and [h.title for h in plain] == ["q-0", "q-1", "q-2"]


def test_second_search_is_served_from_disk_cache():
    r = FakeRetriever(_corpus("cache-test"))
    first = r.search(["alpha", "beta", "alpha"], k=4)
    assert r.calls == [(["alpha", "beta"], 4)]  # duplicates are searched once
    again = FakeRetriever(_corpus("cache-test"))  # a new process: only the disk cache is shared
    assert again.search(["beta", "alpha"], k=4) == [first[1], first[0]]
    assert again.calls == []
    again.search(["beta", "gamma"], k=4)
    assert again.calls == [(["gamma"], 4)]


def test_cache_key_changes_with_k1_k_corpus_and_query():
    base = FakeRetriever(_corpus())
    key = base.query_key("q", 4)
    assert FakeRetriever(_corpus(), k1=1.2).query_key("q", 4) != key
    assert base.query_key("q", 5) != key
    assert FakeRetriever(_corpus("other text")).query_key("q", 4) != key
    assert base.query_key("q2", 4) != key
    assert FakeRetriever(_corpus()).query_key("q", 4) == key
    assert cache_path_of(base, 4) != cache_path_of(FakeRetriever(_corpus(), k1=1.2), 4)


def test_cache_survives_a_torn_last_line():
    r = FakeRetriever(_corpus("torn"))
    r.search(["one"], k=2)
    path = cache_path_of(r, 2)
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"q": "two", "hits": [[')  # a job killed mid-write
    fresh = FakeRetriever(_corpus("torn"))
    fresh.search(["one", "three"], k=2)
    assert fresh.calls == [(["three"], 2)]  # "one" survived; the torn "two" is redone
    later = FakeRetriever(_corpus("torn"))
    later.search(["one", "three"], k=2)
    assert later.calls == []  # the line appended after the torn one is readable


def test_bad_arguments():
    r = FakeRetriever(_corpus())
    with pytest.raises(ConfigError):
        r.search("not a list", k=2)
    with pytest.raises(ConfigError):
        r.search(["q"], k=0)
