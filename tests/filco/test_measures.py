"""The three FilCo measures and their official-code variants on hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pytest

from filco.measures import (
    MeasureSpec,
    Span,
    candidate_spans,
    contains_normalized,
    contains_raw,
    cxmi_log_ratio,
    cxmi_threshold,
    join_spans,
    lexical,
    select_best_above,
    select_spans,
    select_top_per_passage,
    sigmoid,
    strinc,
)
from filco.split import split_sentences
from ragrepro.errors import ConfigError

PASSAGES = ["The cat sat. Dogs concatenate strings. A cat ran.",
            "Paris is the capital of France. It is large."]


def spans():
    return candidate_spans(PASSAGES, lambda p: split_sentences(p, "regex"))


def test_candidate_spans_order_and_indices():
    s = spans()
    assert [(x.passage, x.index) for x in s] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    assert s[3].text == "Paris is the capital of France."


def test_strinc_paper_word_boundaries_vs_code_raw_substring():
    # "cat" inside "concatenate": only the code's raw substring test matches
    assert not contains_normalized("Dogs concatenate strings.", "cat")
    assert contains_raw("Dogs concatenate strings.", "cat")
    # normalisation: punctuation, case and articles
    assert contains_normalized("He loved The Beatles!", "the beatles")
    assert contains_normalized("They founded the U.S.A. in 1776", "USA")
    assert not contains_raw("They founded the U.S.A. in 1776", "USA")
    assert strinc("abc", ["", "zz"], "raw") is False  # empty answer never matches


def test_strinc_selection_first_span_vs_every_sentence():
    paper = MeasureSpec.from_mode("strinc", "paper")
    code = MeasureSpec.from_mode("strinc", "code")
    chosen = select_spans(paper, spans(), task="nq", query="q", outputs=["cat"])
    assert [(x.passage, x.index) for x in chosen] == [(0, 0)]          # first span only
    chosen = select_spans(code, spans(), task="nq", query="q", outputs=["cat"])
    # every sentence with the raw substring, "concatenate" included
    assert [(x.passage, x.index) for x in chosen] == [(0, 0), (0, 1), (0, 2)]
    assert join_spans(chosen) == "The cat sat. Dogs concatenate strings. A cat ran."


def test_lexical_token_f1_vs_char_bag():
    # hand: tokens {paris, is, capital, of, france} vs {paris}: P=1/5, R=1 -> F1 = 1/3
    assert lexical("Paris is the capital of France.", ["Paris"], "token") == pytest.approx(1 / 3)
    assert lexical("abc", ["cba"], "char") == 1.0            # the code's character bag
    assert lexical("abc", ["cba"], "token") == 0.0
    assert lexical("x", ["abc", "x"], "token") == 1.0        # max over references


def test_lexical_paper_selects_best_above_half_and_uses_query_for_fever():
    paper = MeasureSpec.from_mode("lexical", "paper")
    assert paper.threshold == 0.5
    # vs output "capital of France": sentence (1,0) F1 = 2*(3/5*1)/(3/5+1) = 0.75
    chosen = select_spans(paper, spans(), task="nq", query="", outputs=["capital of France"])
    assert [(x.passage, x.index) for x in chosen] == [(1, 0)]
    # a weak match (F1 1/3) is below 0.5: nothing selected
    assert select_spans(paper, spans(), task="nq", query="", outputs=["Paris"]) == []
    # FEVER compares with the claim (query), not the one-word label
    chosen = select_spans(paper, spans(), task="fever", query="Paris is the capital of France",
                          outputs=["SUPPORTS"])
    assert [(x.passage, x.index) for x in chosen] == [(1, 0)]
    code = MeasureSpec.from_mode("lexical", "code")
    # code: char-bag vs the label, best per passage, threshold 0: one sentence per passage
    chosen = select_spans(code, spans(), task="fever", query="ignored", outputs=["SUPPORTS"])
    assert [x.passage for x in chosen] == [0, 1]


def test_select_best_above_is_strict_and_prefers_earlier_on_ties():
    s = [Span(0, 0, "a"), Span(0, 1, "b"), Span(1, 0, "c")]
    assert select_best_above(s, [0.5, 0.5, 0.4], 0.5) == []
    assert select_best_above(s, [0.7, 0.7, 0.6], 0.5) == [s[0]]
    assert select_top_per_passage(s, [0.1, 0.3, -1.0], 0.0) == [s[1]]
    assert select_top_per_passage(s, [0.1, 0.3, 0.0], 0.0, num_sents=2) == [s[1], s[0], s[2]]


def test_cxmi_log_ratio_hand_computation():
    # with context: p = 0.5 * 0.25; without: p = 0.25 * 0.25 -> ratio 2, log-ratio ln 2
    with_ctx = np.log([0.5, 0.25])
    without = np.log([0.25, 0.25])
    assert cxmi_log_ratio(with_ctx, without) == pytest.approx(math.log(2), abs=1e-12)
    assert sigmoid(math.log(2)) == pytest.approx(2 / 3)        # the code's score: r / (1 + r)
    # log space does not underflow where the code's product of probabilities would
    long_with, long_without = np.full(2000, math.log(0.1)), np.full(2000, math.log(0.05))
    assert np.prod(np.exp(long_with)) == 0.0
    assert cxmi_log_ratio(long_with, long_without) == pytest.approx(2000 * math.log(2))
    assert sigmoid(-1000.0) == pytest.approx(0.0) and sigmoid(1000.0) == 1.0


def test_cxmi_thresholds_paper_vs_code():
    paper = MeasureSpec.from_mode("cxmi", "paper")
    assert paper.threshold == 1.0 and cxmi_threshold(paper) == 0.0   # ratio 1 = log-ratio 0
    s = spans()
    ratios = [-0.2, 0.0, 0.3, 0.9, -3.0]
    chosen = select_spans(paper, s, task="wow", query="", outputs=["o"], log_ratios=ratios)
    assert chosen == [s[3]]
    # no span raises the probability: nothing selected in paper mode
    assert select_spans(paper, s, task="wow", query="", outputs=["o"],
                        log_ratios=[-1.0] * 5) == []
    code = MeasureSpec.from_mode("cxmi", "code")
    # code: sigmoid >= 0 always passes; best sentence of every passage
    chosen = select_spans(code, s, task="wow", query="", outputs=["o"], log_ratios=[-1.0] * 5)
    assert [(x.passage, x.index) for x in chosen] == [(0, 0), (1, 0)]
    with pytest.raises(ConfigError, match="keeps every span"):
        MeasureSpec.from_mode("cxmi", "paper", threshold=0.0)
    with pytest.raises(ConfigError, match="one log-ratio per"):
        select_spans(paper, s, task="wow", query="", outputs=["o"], log_ratios=[0.1])


def test_bad_measure_names():
    with pytest.raises(ConfigError, match="filco.measure"):
        MeasureSpec.from_mode("bleu")
    with pytest.raises(ConfigError, match="measure_mode"):
        MeasureSpec.from_mode("strinc", "official")


def test_splitters():
    text = "Dr. Smith went to Washington D.C. in 1999. He met the U.S. president. It rained!"
    assert split_sentences(text, "pysbd") == ["Dr. Smith went to Washington D.C. in 1999.",
                                              "He met the U.S. president.", "It rained!"]
    assert split_sentences("One. Two? Three!", "regex") == ["One.", "Two?", "Three!"]
    assert split_sentences("   ", "pysbd") == []
    with pytest.raises(ConfigError, match="splitter"):
        split_sentences("x", "nltk")
