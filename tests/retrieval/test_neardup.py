"""Near-duplicate exclusion: word n-grams, containment by hand, and the filter's bookkeeping."""
import pytest

from ragrepro.errors import ConfigError
from ragrepro.retrieval.neardup import NearDupFilter, containment, word_ngrams

TEXT = "The HTTP cookie is a small piece of data sent by a web server."


def test_word_ngrams_lowercase_and_punctuation():
    assert word_ngrams("A b, C-d", 2) == {("a", "b"), ("b", "c"), ("c", "d")}
    assert word_ngrams("one two", 3) == set()
    with pytest.raises(ConfigError):
        word_ngrams("x", 0)


def test_containment_hand_computed():
    ref = word_ngrams(TEXT, 3)
    # doc: 9 words -> 7 trigrams (a computer cookie) (computer cookie is) (cookie is a)
    # (is a small) (a small piece) (small piece of) (piece of data); the last 5 are in TEXT
    assert containment("A computer cookie is a small piece of data", ref, 3) == pytest.approx(5 / 7)
    assert containment("Completely different words here", ref, 3) == 0.0
    assert containment("too short", ref, 3) == 0.0
    assert containment(TEXT.upper(), ref, 3) == 1.0


def test_filter_drops_above_threshold_and_counts_each_document_once():
    f = NearDupFilter([TEXT], n=3, threshold=0.5)
    docs = [{"id": "alias", "text": "A computer cookie is a small piece of data"},  # 5/7
            {"id": "other", "text": "Cookies are baked from dough and sugar"},        # 0
            {"id": "half", "text": "The HTTP cookie tastes sweet"}]                   # 1/3
    assert [d["id"] for d in f.keep(docs)] == ["other", "half"]
    assert [d["id"] for d in f.keep(docs[:1])] == []
    assert f.removed == {"alias": pytest.approx(0.7143, abs=1e-4)}
    assert f.settings() == {"near_dup_ngram": 3, "near_dup_threshold": 0.5,
                            "near_dup_removed": 1}
    # the threshold is strict: exactly 1/3 contained is kept at threshold 1/3
    assert [d["id"] for d in NearDupFilter([TEXT], 3, 1 / 3).keep(docs[2:])] == ["half"]


def test_bad_threshold_is_a_config_error():
    with pytest.raises(ConfigError, match="threshold"):
        NearDupFilter([TEXT], 8, 1.0)
