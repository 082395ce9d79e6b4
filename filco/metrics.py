"""FilCo's official-code answer metrics (eval.py of the FilCo repository), kept under their
own names because they change the numbers: its normalisation keeps punctuation, and its
"unigram F1" counts characters. Registered through FilCo's profile (filco/profile.py,
`metrics`), so the core's registry finds them by name like its own."""
from __future__ import annotations

from collections.abc import Sequence

from ragrepro.metrics.qa import ARTICLES, f1_from_bags
from ragrepro.metrics.registry import AnswerForm, pct

FILCO_CODE = "filco_code"


def normalize_filco_code(text: str) -> str:
    """FilCo's eval.py normalize_text: lower, drop articles, collapse spaces; punctuation kept."""
    return " ".join(ARTICLES.sub(" ", text.lower()).split())


def char_f1_filco(prediction: str, answer: str) -> float:
    """FilCo code's "unigram F1": Counter over the normalised *string*, i.e. a character bag."""
    return f1_from_bags(list(normalize_filco_code(prediction)),
                        list(normalize_filco_code(answer)))


def em_filco_code(prediction: str, answers: Sequence[str]) -> float:
    """FilCo eval.py EM: punctuation kept ("Beatles." != "the Beatles")."""
    norm = normalize_filco_code(prediction)
    return float(any(norm == normalize_filco_code(a) for a in answers))


def f1_char_filco_code(prediction: str, answers: Sequence[str]) -> float:
    """FilCo eval.py F1 (character bag), max over gold answers."""
    return max((char_f1_filco(prediction, a) for a in answers), default=0.0)


# Headline ranks 50 and 60: after the core's SQuAD metrics (30, 40), before accuracy (70),
# where the dashboard has always shown them.
METRICS = (
    pct("em_filco_code", "exact match, FilCo eval.py normalisation (%)", fn=em_filco_code,
        headline=50, rescore=AnswerForm("em", FILCO_CODE, normalize_filco_code)),
    pct("f1_char_filco_code", "character-level F1, FilCo eval.py (%)", fn=f1_char_filco_code,
        headline=60, rescore=AnswerForm("f1_char", FILCO_CODE, normalize_filco_code)),
)
