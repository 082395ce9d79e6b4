"""The core's metric columns, in one table (ragrepro.metrics.registry.Metric each): the
per-sample function where there is one, and every fact the report reads, stated once.

Headline ranks leave gaps so a method's headline metrics (FilCo's: filco/metrics.py) sit
between the core's where the dashboard has always shown them."""
from __future__ import annotations

from . import autoais, perplexity, qa
from .registry import AnswerForm, Metric, pct, register

SQUAD = "squad"


def _squad(family: str, text_field: str = "prediction") -> AnswerForm:
    return AnswerForm(family, SQUAD, qa.normalize_squad, text_field)


for _metric in (
    Metric("ppl_word", "word-level perplexity", fn=perplexity.ppl_word, higher_is_better=False,
           decimals=2, headline=10, resample="windows", count="n_words"),
    Metric("ppl_token", "token-level perplexity", fn=perplexity.ppl_token,
           higher_is_better=False, decimals=2, headline=20, resample="windows",
           count="n_tokens"),
    pct("em_squad", "exact match, SQuAD-normalised (%)", fn=qa.em_squad, headline=30,
        rescore=_squad("em")),
    # ralm.qa writes em_squad under the official eval_qa.py name `em`.
    pct("em", "exact match, SQuAD-normalised (%)", same_as="em_squad"),
    pct("f1_squad", "token F1, SQuAD-normalised (%)", fn=qa.f1_squad, headline=40,
        rescore=_squad("f1")),
    pct("accuracy", "accuracy (%)", fn=qa.accuracy, headline=70, rescore=_squad("accuracy")),
    pct("has_answer", "answer string in prediction (%)", fn=qa.has_answer, headline=80,
        rescore=_squad("has_answer", text_field="prompt")),
    pct("autoais", "AutoAIS (%)", fn=autoais.autoais, headline=90, resample="autoais",
        record_field="attributed"),
    pct("unigram_precision", "unigram precision (%)", fn=qa.unigram_precision_metric,
        headline=100),
    pct("recall_at_k", "recall of the top-k passages (%): answer string or gold article, "
        "see recall_at_k_kind", fn=qa.recall_at_k, headline=110),
    Metric("n_tokens", "scored tokens", unit="tokens", decimals=0),
    Metric("input_tokens", "input length (tokens)", unit="tokens", higher_is_better=False,
           decimals=0),
    Metric("avg_input_tokens", "mean input length (tokens)", unit="tokens",
           higher_is_better=False, decimals=0),
    # Below: columns shown under their own name (no label the tables would print).
    # The offline judge standing in for the T5 AutoAIS model, and the soft (NLI) scores.
    Metric("autoais_substitute", resample="autoais", record_field="attributed"),
    Metric("autoais_mean_score", resample="autoais", record_field="nli_score"),
    Metric("autoais_substitute_mean_score", resample="autoais", record_field="nli_score"),
):
    register(_metric)
