"""Answer metrics. `*_squad` use SQuAD normalisation (lower-case, strip punctuation,
drop a/an/the, collapse whitespace). A method's own variants (FilCo's official-code
normalisation: filco/metrics.py) live in the method and are registered by its profile.
Registered by name in ragrepro.metrics.builtin."""
from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_squad(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = ARTICLES.sub(" ", text)
    return " ".join(text.split())


def f1_from_bags(pred: Sequence[str], gold: Sequence[str]) -> float:
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
    return f1_from_bags(pred, gold)


def unigram_precision(prediction: str, reference: str) -> float:
    """Share of the prediction's normalised tokens that occur in the reference (bag overlap)."""
    pred, ref = normalize_squad(prediction).split(), normalize_squad(reference).split()
    if not pred:
        return 0.0
    return sum((Counter(pred) & Counter(ref)).values()) / len(pred)


def em_squad(prediction: str, answers: Sequence[str]) -> float:
    """Exact match after SQuAD normalisation, max over gold answers."""
    norm = normalize_squad(prediction)
    return float(any(norm == normalize_squad(a) for a in answers))


def f1_squad(prediction: str, answers: Sequence[str]) -> float:
    """Token-level F1 after SQuAD normalisation, max over gold answers."""
    return max((token_f1(prediction, a) for a in answers), default=0.0)


def accuracy(prediction: str, answers: Sequence[str]) -> float:
    """Label accuracy (FEVER): normalised prediction equals the gold label."""
    return em_squad(prediction, answers)


def has_answer(text: str, answers: Sequence[str]) -> float:
    """Some normalised gold answer is a substring of the normalised text (RALM eval_qa)."""
    norm = normalize_squad(text)
    return float(any(normalize_squad(a) and normalize_squad(a) in norm for a in answers))


def unigram_precision_metric(prediction: str, reference: str) -> float:
    """FilCo Table 3: unigram precision of the output against the context."""
    return unigram_precision(prediction, reference)


def recall_at_k(retrieved_titles: Sequence[str], gold_titles: Sequence[str]) -> float:
    """1 if any gold title is among the retrieved ones (the caller cuts the list at k)."""
    gold = set(gold_titles)
    return float(any(t in gold for t in retrieved_titles))
