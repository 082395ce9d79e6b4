"""BM25 through pyserini/Lucene over the embedded wiki-vital corpus (index built once)."""
from __future__ import annotations

import os

import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from ragrepro.retrieval import build_retriever
from ragrepro.retrieval.base import cache_path_of
from ragrepro.retrieval.bm25 import BM25Retriever, parse_contents, parse_raw
from ragrepro.retrieval.corpus import Corpus
from ragrepro.retrieval.jvm import OPENAI_PLACEHOLDER, ensure_openai_placeholder


@pytest.fixture(scope="module")
def bm25(vital, retrieval_cache):
    from omegaconf import OmegaConf

    cfg = OmegaConf.load("conf/retriever/bm25.yaml")
    # module fixtures run before the autouse cache fixture; set for the build only, so that
    # the worker's later tests do not inherit this folder as their cache
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAGREPRO_CACHE", str(retrieval_cache))
        return build_retriever(cfg, vital)


def test_carmen_is_top1_and_scores_decrease(bm25):
    [hits] = bm25.search(["opera in four acts by Georges Bizet"], k=10)
    assert hits[0].title == "Carmen"
    assert "Bizet" in hits[0].text
    assert len(hits) == 10
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]


def test_batched_results_equal_single_queries(bm25):
    queries = ["capital of France", "largest planet of the solar system", "Carmen Bizet"]
    batched = bm25.search(queries, k=5)
    for q, hits in zip(queries, batched):
        bm25.cache = False
        try:
            assert bm25.search([q], k=5)[0] == hits
        finally:
            bm25.cache = True


def test_hits_carry_exact_passages_even_with_line_breaks(bm25, vital):
    target = next(p for p in vital if "\n" in p.text and len(p.text.split()) > 30)
    query = " ".join(target.text.split()[:25])
    [hits] = bm25.search([query], k=3)
    assert hits[0].pid == target.pid
    assert (hits[0].title, hits[0].text) == (target.title, target.text)


def test_forbidden_titles_drop_hits(bm25):
    [hits] = bm25.search(["opera in four acts by Georges Bizet"], k=5, exclude_titles=["Carmen"],
                         fetch=20)
    assert "Carmen" not in [h.title for h in hits] and len(hits) == 5
    [plain] = bm25.search(["opera in four acts by Georges Bizet"], k=6)
    assert [h.pid for h in hits] == [h.pid for h in plain[1:6]]


def test_second_search_served_from_cache_and_k1_changes_key(bm25, vital):
    query = ["symphony composed in Vienna by a deaf composer"]
    first = bm25.search(query, k=4)
    path = cache_path_of(bm25, 4)
    assert path.exists() and query[0] in path.read_text(encoding="utf-8")
    fresh = BM25Retriever(vital)  # same settings: served from disk, Lucene not searched
    fresh._search = None  # would fail if called
    assert fresh.search(query, k=4) == first
    other = BM25Retriever(vital, k1=1.2)
    assert other.query_key(query[0], 4) != bm25.query_key(query[0], 4)
    assert cache_path_of(other, 4) != path
    rescored = other.search(query, k=4)
    assert [h.score for h in rescored[0]] != [h.score for h in first[0]]


def test_empty_query_returns_no_hits(bm25):
    assert bm25.search([""], k=3) == [[]]


def test_existing_index_path_is_used(bm25, vital):
    path = bm25.index_settings() and bm25._searcher.index_dir
    by_path = BM25Retriever(vital, index=path, cache=False)
    [a] = by_path.search(["opera in four acts by Georges Bizet"], k=3)
    [b] = bm25.search(["opera in four acts by Georges Bizet"], k=3)
    assert a == b
    assert by_path.contents(a[0]) == bm25.contents(b[0]) == f"Carmen\n{b[0].text}"


def test_unknown_prebuilt_index_is_a_config_error(vital):
    r = BM25Retriever(vital, index="wikipedia-dpr-nonexistent")
    with pytest.raises(ConfigError, match="wikipedia-dpr"):
        r.search(["q"], k=1)
    with pytest.raises(ConfigError, match="does not exist"):
        BM25Retriever(vital, index="/no/such/index").search(["q"], k=1)


def test_small_corpus_index_with_multiline_text():
    corpus = Corpus("tiny", [Passage("a", "Alpha", "first line\nsecond line about zebras"),
                             Passage("b", "Beta", "nothing here")])
    [hits] = BM25Retriever(corpus).search(["zebras"], k=2)
    assert [(h.pid, h.title, h.text) for h in hits] == [("a", "Alpha",
                                                         "first line\nsecond line about zebras")]


def test_parse_contents_splits_at_the_first_newline_only():
    assert parse_contents('"Aaron"\nAaron is\na prophet') == ("Aaron", "Aaron is\na prophet")
    assert parse_contents("no title line") == ("", "no title line")
    assert parse_contents('""Heroes" (song)"\ntext') == ('"Heroes" (song)', "text")
    assert parse_raw('{"id": "1", "contents": "\\"T\\"\\nx\\ny"}') == ("T", "x\ny")


def test_openai_placeholder_never_overwrites_a_real_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ensure_openai_placeholder()
    assert os.environ["OPENAI_API_KEY"] == OPENAI_PLACEHOLDER
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real")
    ensure_openai_placeholder()
    assert os.environ["OPENAI_API_KEY"] == "sk-real"


def test_lucene_searcher_skips_pyserini_encode_until_a_dense_searcher_is_asked_for():
    """BM25's process never imports pyserini.encode (3.6 s of transformers, openai, sklearn);
    pyserini's other searchers still import on first access, as the real classes."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from ragrepro.retrieval.jvm import lucene_searcher\n"
        "cls = lucene_searcher()\n"
        "print(cls.__module__, cls.__name__, 'pyserini.encode' in sys.modules)\n"
        "from pyserini.search.lucene import LuceneImpactSearcher, LuceneHnswDenseSearcher\n"
        "from pyserini.search.lucene import _impact_searcher\n"
        "print(LuceneImpactSearcher.__module__, LuceneHnswDenseSearcher.__module__,\n"
        "      _impact_searcher.LuceneImpactSearcher is LuceneImpactSearcher,\n"
        "      'pyserini.encode' in sys.modules)\n"
        "import pyserini.search.lucene as pkg\n"
        "try:\n"
        "    pkg.NoSuchSearcher\n"
        "except AttributeError as e:\n"
        "    print('AttributeError', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env={**os.environ, "OPENAI_API_KEY": "unused"}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "pyserini.search.lucene._searcher LuceneSearcher False"
    assert lines[1] == ("pyserini.search.lucene._impact_searcher "
                        "pyserini.search.lucene._hnsw_searcher True True")
    assert lines[2].startswith("AttributeError") and "NoSuchSearcher" in lines[2]
