"""The hand-checked attribution-judge set and how a judge is scored on it.

`attribution_judge.jsonl` (ragrepro/data/embedded, built by scripts/judge_build_set.py, made as
docs/autoais.md says): (evidence, question, answer, attributable) items from wiki-vital, half
attributable, the other half non-attributable negatives of named kinds. A judge's quality is
its confusion matrix against the hand labels: accuracy (with a 95% bootstrap CI over items),
and precision and recall of "attributable".
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..stats import bootstrap_ci, mean_units

JUDGE_SET_FILE = "attribution_judge.jsonl"
SUPPORTED = "supported"
NEGATIVE_KINDS = ("wrong_answer_in_passage", "topic_passage_lacks_answer", "related_unsupported")
FIELDS = ("id", "qid", "source_split", "evidence_title", "evidence", "question", "answer",
          "attributable", "kind", "checked_by", "reason")


@dataclass(frozen=True)
class JudgeItem:
    """One hand-labelled item: is `answer` to `question` attributable to `evidence`?"""

    id: str
    qid: str
    source_split: str
    evidence_title: str
    evidence: str
    question: str
    answer: str
    attributable: bool
    kind: str
    checked_by: str
    reason: str

    @property
    def content_sha(self) -> str:
        """Hash of what a judge sees and the label: a stored decision is reused only while
        the item is unchanged."""
        key = json.dumps([self.evidence, self.question, self.answer, self.attributable])
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def judge_set_path() -> Path:
    return Path(str(resources.files("ragrepro.data.embedded") / JUDGE_SET_FILE))


def load_judge_set(path: Path | None = None) -> list[JudgeItem]:
    """The set's items in file order; a missing field or an unknown kind is a DataError."""
    items = []
    for n, line in enumerate((path or judge_set_path()).read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        missing = [f for f in FIELDS if f not in row]
        if missing:
            raise DataError(f"{JUDGE_SET_FILE} line {n + 1}: missing {missing}")
        if row["kind"] not in (SUPPORTED, *NEGATIVE_KINDS):
            raise DataError(f"{JUDGE_SET_FILE} line {n + 1}: unknown kind {row['kind']!r}")
        if row["attributable"] != (row["kind"] == SUPPORTED):
            raise DataError(f"{JUDGE_SET_FILE} line {n + 1}: label and kind disagree")
        items.append(JudgeItem(**{f: row[f] for f in FIELDS}))
    return items


@dataclass(frozen=True)
class Confusion:
    """Counts with "attributable" as the positive class."""

    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else math.nan

    @property
    def precision(self) -> float:
        """NaN when the judge never says "attributable" (undefined, not 0)."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan


def confusion(labels: Sequence[bool], predictions: Sequence[bool]) -> Confusion:
    if len(labels) != len(predictions):
        raise DataError(f"{len(labels)} labels but {len(predictions)} predictions")
    pairs = list(zip(map(bool, labels), map(bool, predictions)))
    return Confusion(tp=pairs.count((True, True)), fp=pairs.count((False, True)),
                     tn=pairs.count((False, False)), fn=pairs.count((True, False)))


def judge_quality(ids: Sequence[str], labels: Sequence[bool], predictions: Sequence[bool],
                  resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Accuracy with its 95% percentile-bootstrap CI over items (ragrepro.stats), precision
    and recall of "attributable", and the confusion counts."""
    c = confusion(labels, predictions)
    correct = [float(bool(a) == bool(b)) for a, b in zip(labels, predictions)]
    ci = bootstrap_ci(mean_units(list(ids), correct, unit="items"), resamples=resamples,
                      seed=seed)
    return {"n": c.n, "accuracy": c.accuracy, "accuracy_ci_low": ci.low,
            "accuracy_ci_high": ci.high, "precision": c.precision, "recall": c.recall,
            "tp": c.tp, "fp": c.fp, "tn": c.tn, "fn": c.fn}


def accuracy_label(accuracy: float, low: float, high: float, n: int, rule: str = "") -> str:
    """How a judge's accuracy is printed next to an autoais_substitute number."""
    text = f"{100 * accuracy:.1f}% [{100 * low:.1f}, {100 * high:.1f}] on {n} hand-checked items"
    return f"{text} ({rule})" if rule else text


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """P(score of a random attributable item > score of a random non-attributable one), ties
    counting half (Mann-Whitney): how well the judge ranks items, whatever its threshold."""
    pos = [s for lab, s in zip(labels, scores) if lab]
    neg = [s for lab, s in zip(labels, scores) if not lab]
    if not pos or not neg:
        return math.nan
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def best_threshold(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """The decision threshold (attributed iff score > t) with the highest accuracy on these
    items: t runs over the midpoints between consecutive distinct scores (and below the
    lowest); ties go to the lowest such t."""
    distinct = sorted({float(s) for s in scores})
    cands = [distinct[0] - 1e-9] + [(a + b) / 2 for a, b in itertools.pairwise(distinct)]
    best, best_acc = cands[0], -1.0
    for t in cands:
        acc = sum((s > t) == bool(lab) for lab, s in zip(labels, scores)) / len(labels)
        if acc > best_acc:
            best, best_acc = t, acc
    return best


def cross_validated(groups: Sequence[str], labels: Sequence[bool], scores: Sequence[float],
                    folds: int = 5) -> tuple[list[bool], list[float]]:
    """Out-of-fold decisions with a threshold chosen on the other folds: an honest estimate
    of a calibrated judge. Items of one group (a question's positive and negative) share a
    fold; groups go to folds in sorted order, round robin."""
    fold_of = {g: i % folds for i, g in enumerate(sorted(set(groups)))}
    preds: list[bool] = [False] * len(labels)
    thresholds = []
    for f in range(folds):
        train = [i for i, g in enumerate(groups) if fold_of[g] != f]
        t = best_threshold([labels[i] for i in train], [scores[i] for i in train])
        thresholds.append(t)
        for i, g in enumerate(groups):
            if fold_of[g] == f:
                preds[i] = scores[i] > t
    return preds, thresholds


def accuracy_by_kind(items: Sequence[JudgeItem], predictions: Sequence[bool]) -> dict[str, float]:
    """Share of items of each kind the judge labels correctly."""
    out: dict[str, float] = {}
    for kind in (SUPPORTED, *NEGATIVE_KINDS):
        hits = [p == it.attributable for it, p in zip(items, predictions) if it.kind == kind]
        out[kind] = sum(hits) / len(hits) if hits else math.nan
    return out
