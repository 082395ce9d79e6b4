"""Answer metrics. `*_squad` use SQuAD normalisation (lower-case, strip punctuation,
drop a/an/the, collapse whitespace); the FilCo official-code variants are kept under
their own names because they change the numbers."""
from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from .registry import register_metric

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_squad(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def normalize_filco_code(text: str) -> str:
    """FilCo's eval.py normalize_text: lower, drop articles, collapse spaces; punctuation kept."""
    return " ".join(_ARTICLES.sub(" ", text.lower()).split())


def _f1_from_bags(pred: Sequence[str], gold: Sequence[str]) -> float:
    common = Counter(pred) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answer: str) -> float:
    """SQuAD token-level F1 between two strings."""
    pred, gold = normalize_squad(prediction).split(), normalize_squad(answer).split()
    if not pred and not gold:
        return 1.0
    return _f1_from_bags(pred, gold)


def char_f1_filco(prediction: str, answer: str) -> float:
    """FilCo code's "unigram F1": Counter over the normalised *string*, i.e. a character bag."""
    return _f1_from_bags(list(normalize_filco_code(prediction)), list(normalize_filco_code(answer)))


def unigram_precision(prediction: str, reference: str) -> float:
    """Share of the prediction's normalised tokens that occur in the reference (bag overlap)."""
    pred, ref = normalize_squad(prediction).split(), normalize_squad(reference).split()
    if not pred:
        return 0.0
    return sum((Counter(pred) & Counter(ref)).values()) / len(pred)


@register_metric("em_squad", aggregation="mean", higher_is_better=True)
def em_squad(prediction: str, answers: Sequence[str]) -> float:
    """Exact match after SQuAD normalisation, max over gold answers."""
    norm = normalize_squad(prediction)
    return float(any(norm == normalize_squad(a) for a in answers))


@register_metric("em_filco_code", aggregation="mean", higher_is_better=True)
def em_filco_code(prediction: str, answers: Sequence[str]) -> float:
    """FilCo eval.py EM: punctuation kept ("Beatles." != "the Beatles")."""
    norm = normalize_filco_code(prediction)
    return float(any(norm == normalize_filco_code(a) for a in answers))


@register_metric("f1_squad", aggregation="mean", higher_is_better=True)
def f1_squad(prediction: str, answers: Sequence[str]) -> float:
    """Token-level F1 after SQuAD normalisation, max over gold answers."""
    return max((token_f1(prediction, a) for a in answers), default=0.0)


@register_metric("f1_char_filco_code", aggregation="mean", higher_is_better=True)
def f1_char_filco_code(prediction: str, answers: Sequence[str]) -> float:
    """FilCo eval.py F1 (character bag), max over gold answers."""
    return max((char_f1_filco(prediction, a) for a in answers), default=0.0)


@register_metric("accuracy", aggregation="mean", higher_is_better=True)
def accuracy(prediction: str, answers: Sequence[str]) -> float:
    """Label accuracy (FEVER): normalised prediction equals the gold label."""
    return em_squad(prediction, answers)


@register_metric("has_answer", aggregation="mean", higher_is_better=True)
def has_answer(text: str, answers: Sequence[str]) -> float:
    """Some normalised gold answer is a substring of the normalised text (RALM eval_qa)."""
    norm = normalize_squad(text)
    return float(any(normalize_squad(a) and normalize_squad(a) in norm for a in answers))


@register_metric("unigram_precision", aggregation="mean", higher_is_better=True)
def unigram_precision_metric(prediction: str, reference: str) -> float:
    """FilCo Table 3: unigram precision of the output against the context."""
    return unigram_precision(prediction, reference)


@register_metric("recall_at_k", aggregation="mean", higher_is_better=True)
def recall_at_k(retrieved_titles: Sequence[str], gold_titles: Sequence[str]) -> float:
    """1 if any gold title is among the retrieved ones (the caller cuts the list at k)."""
    gold = set(gold_titles)
    return float(any(t in gold for t in retrieved_titles))
