"""The hand-checked attribution-judge set and the judge-quality arithmetic."""
from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from ragrepro.metrics.autoais import AttributionItem, AutoAIS, LLMJudgeScorer, judge_prompt
from ragrepro.metrics.judge_set import (
    NEGATIVE_KINDS,
    SUPPORTED,
    accuracy_by_kind,
    confusion,
    judge_quality,
    judge_set_path,
    load_judge_set,
)


@pytest.fixture(scope="module")
def items():
    return load_judge_set()


def _norm(s: str) -> str:
    return s.replace("\xa0", " ").lower()


def test_set_is_large_balanced_and_every_item_checked(items) -> None:
    assert len(items) >= 120
    assert len({it.id for it in items}) == len(items)
    assert sum(it.attributable for it in items) * 2 == len(items)
    kinds = Counter(it.kind for it in items if not it.attributable)
    assert set(kinds) == set(NEGATIVE_KINDS) and min(kinds.values()) >= 20
    assert all(it.checked_by.strip() and it.reason.strip() for it in items)
    # each question is asked once with a supported answer and once with a negative
    per_q = Counter((it.qid, it.attributable) for it in items)
    assert set(per_q.values()) == {1} and len(per_q) == len(items)


def test_items_come_from_corpus_articles_never_from_test_items(items) -> None:
    from ragrepro.data.loaders import vital_qa_path
    from ragrepro.data.vital import heldout_split, load_articles

    leads = {a["title"]: a["extract"] for a in load_articles()}
    qa = {json.loads(x)["qid"]: json.loads(x) for x in vital_qa_path().read_text().splitlines()}
    test_titles = {t for r in qa.values() if r["split"] == "test" for t in r["gold_titles"]}
    for it in items:
        q = qa[it.qid]
        assert q["split"] in ("train", "dev") and it.question == q["question"]
        assert it.evidence == leads[it.evidence_title]
        assert heldout_split(it.evidence_title) is None
        assert it.evidence_title not in test_titles


def test_kinds_have_the_shape_their_names_say(items) -> None:
    """Typing guards on the hand labels (the labels themselves were read by a person)."""
    by_q = {it.qid: it for it in items if it.kind == SUPPORTED}
    for it in items:
        gold = by_q[it.qid]
        if it.kind == SUPPORTED:
            assert _norm(it.answer) in _norm(it.evidence)
        elif it.kind == "wrong_answer_in_passage":
            assert it.evidence == gold.evidence and it.answer != gold.answer
            assert _norm(it.answer) in _norm(it.evidence)
        elif it.kind == "related_unsupported":
            assert it.evidence == gold.evidence and _norm(it.answer) not in _norm(it.evidence)
        else:
            assert it.answer == gold.answer and it.evidence_title != gold.evidence_title


def test_the_build_script_reproduces_the_file() -> None:
    from scripts.judge_build_set import build

    text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in build())
    assert text == judge_set_path().read_text(encoding="utf-8")


def test_confusion_on_a_hand_computed_matrix() -> None:
    labels = [True, True, True, False, False, False, False, True]
    preds = [True, False, True, True, False, False, True, True]
    c = confusion(labels, preds)
    assert (c.tp, c.fn, c.fp, c.tn) == (3, 1, 2, 2)
    assert c.accuracy == pytest.approx(5 / 8)
    assert c.precision == pytest.approx(3 / 5)
    assert c.recall == pytest.approx(3 / 4)
    q = judge_quality([f"i{k}" for k in range(8)], labels, preds, resamples=500)
    assert q["accuracy"] == pytest.approx(5 / 8)
    assert 0 <= q["accuracy_ci_low"] < 5 / 8 < q["accuracy_ci_high"] <= 1


def test_constant_judges_are_the_baselines() -> None:
    labels = [True, False, True, False]
    never = confusion(labels, [False] * 4)
    assert never.accuracy == 0.5 and never.recall == 0.0 and math.isnan(never.precision)
    always = confusion(labels, [True] * 4)
    assert always.accuracy == 0.5 and always.recall == 1.0 and always.precision == 0.5


def test_accuracy_by_kind(items) -> None:
    preds = [it.attributable or it.kind == NEGATIVE_KINDS[0] for it in items]
    acc = accuracy_by_kind(items, preds)
    assert acc[SUPPORTED] == 1.0 and acc[NEGATIVE_KINDS[0]] == 0.0
    assert acc[NEGATIVE_KINDS[1]] == acc[NEGATIVE_KINDS[2]] == 1.0


class _TwoRowLM:
    """Hides `.model`, so the judge scores " yes" and " no" as two continuations."""

    def __init__(self, lm):
        self.lm, self.name = lm, lm.name

    def encode(self, text):
        return self.lm.encode(text)

    def score_targets(self, rows, starts, batch_size=8):
        return self.lm.score_targets(rows, starts, batch_size=batch_size)


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["smollm", "gemma"])
def test_one_forward_pass_equals_scoring_both_continuations(fixture, request) -> None:
    """The single-pass shortcut (yes/no are one token each) gives the two-row numbers;
    Gemma checks BOS and the soft-capped head."""
    lm = request.getfixturevalue(fixture)
    prompt = judge_prompt("Laos. Its capital is Vientiane.", "What is the capital of Laos?",
                          "Vientiane")
    fast = LLMJudgeScorer(lm).score_prompts([prompt])[0]
    slow = LLMJudgeScorer(_TwoRowLM(lm)).score_prompts([prompt])[0]
    assert fast["logp_yes"] == pytest.approx(slow["logp_yes"], abs=1e-4)
    assert fast["logp_no"] == pytest.approx(slow["logp_no"], abs=1e-4)
    ev = AutoAIS(LLMJudgeScorer(lm), passage_format="text")
    res = ev.evaluate([AttributionItem("What is the capital of Laos?", "Vientiane", "Laos",
                                       "Laos. Its capital is Vientiane.")])
    assert res.per_sample[0]["nli_score"] == pytest.approx(fast["nli_score"], abs=1e-6)
