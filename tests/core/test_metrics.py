import math

import pytest

from filco.metrics import char_f1_filco
from ragrepro.errors import ConfigError
from ragrepro.metrics import aggregate, computable, get_metric
from ragrepro.metrics.perplexity import count_words
from ragrepro.metrics.qa import normalize_squad, token_f1, unigram_precision


def test_squad_normalisation():
    assert normalize_squad("The  Beatles!") == "beatles"
    assert normalize_squad("A cat, an owl") == "cat owl"


def test_em_and_f1_by_hand():
    em = get_metric("em_squad").fn
    assert em("the Beatles.", ["Beatles"]) == 1.0
    assert em("Beatles and Stones", ["Beatles"]) == 0.0
    # pred tokens {paris, france}, gold {paris}: P=1/2, R=1, F1=2/3
    assert token_f1("Paris, France", "Paris") == pytest.approx(2 / 3)
    assert get_metric("f1_squad").fn("Paris, France", ["Lyon", "Paris"]) == pytest.approx(2 / 3)


def test_filco_code_variants_change_numbers():
    # punctuation is kept by the FilCo code's EM, removed by SQuAD's
    assert get_metric("em_filco_code").fn("Beatles.", ["the Beatles"]) == 0.0
    assert get_metric("em_squad").fn("Beatles.", ["the Beatles"]) == 1.0
    # character bag: an anagram is a perfect match
    assert char_f1_filco("abc", "cba") == 1.0
    assert token_f1("abc", "cba") == 0.0


def test_unigram_precision_by_hand():
    # 3 prediction tokens, 2 of them in the reference
    assert unigram_precision("red big car", "a big red house") == pytest.approx(2 / 3)


def test_perplexity_aggregation_from_sums():
    values = [get_metric("ppl_token").fn(2.0, 4), get_metric("ppl_token").fn(6.0, 4)]
    assert aggregate("ppl_token", values) == pytest.approx(math.exp(8.0 / 8))
    assert not get_metric("ppl_word").higher_is_better
    assert get_metric("em_squad").higher_is_better


def test_word_count_rules():
    text = "a  b\nc "
    assert count_words(text, "spaces") == 3  # official RALM: number of " " characters
    assert count_words(text, "whitespace_split") == 3
    assert count_words("one two\nthree", "spaces") == 1
    assert count_words("one two\nthree", "whitespace_split") == 3


def test_unknown_metric_suggests():
    with pytest.raises(ConfigError, match="em_squad"):
        get_metric("em_squad_")
    assert "f1_squad" in computable()
