"""The hand-checked attribution-judge set and the judge-quality arithmetic."""
from __future__ import annotations

import csv
import functools
import json
import math
from collections import Counter
from types import SimpleNamespace

import pytest

from ragrepro.errors import ConfigError
from ragrepro.metrics.autoais import (
    AttributionItem,
    AutoAIS,
    LLMJudgeScorer,
    judge_prompt,
    load_autoais,
)
from ragrepro.metrics.judge_set import (
    NEGATIVE_KINDS,
    SUPPORTED,
    accuracy_by_kind,
    accuracy_label,
    best_threshold,
    confusion,
    cross_validated,
    judge_quality,
    judge_set_path,
    load_judge_set,
    roc_auc,
)
from ragrepro.metrics.llm_judge import JUDGE_ACCURACY
from ragrepro.paths import REPO_ROOT


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


def test_roc_auc_counts_ordered_pairs() -> None:
    # pairs (pos, neg): (.9,.2) win, (.9,.5) win, (.4,.2) win, (.4,.5) loss -> 3/4
    assert roc_auc([True, False, True, False], [0.9, 0.2, 0.4, 0.5]) == pytest.approx(0.75)
    assert roc_auc([True, False], [0.3, 0.3]) == pytest.approx(0.5)
    assert math.isnan(roc_auc([True, True], [0.1, 0.2]))


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


class _NamedLM:
    """Enough of an LM for the judge's settings: a name and a model with a dtype."""

    def __init__(self, name: str, dtype: str = "float32"):
        import torch

        self.name = name
        self.model = SimpleNamespace(dtype=getattr(torch, dtype))

    def encode(self, text):
        return [len(w) for w in text.split()]


def test_judge_model_replaces_the_runs_own_lm() -> None:
    run_lm = _NamedLM("run-lm")
    scorer = lambda ev: ev.settings()["autoais_substitute"]
    assert scorer(load_autoais(backend="llm-judge", lm=run_lm)) == "llm-judge:run-lm"
    # the legacy cfg path hands over the composed node as a plain mapping
    node = {"_target_": "types.SimpleNamespace", "name": "from-config"}
    assert scorer(load_autoais(backend="llm-judge", lm=run_lm, judge_model=node)) \
        == "llm-judge:from-config"
    # a Hydra partial is loaded only when the judge is built
    loaded = []
    part = functools.partial(lambda name: loaded.append(name) or _NamedLM(name), "partial")
    ev = load_autoais(backend="llm-judge", lm=run_lm, judge_model=part)
    assert scorer(ev) == "llm-judge:partial" and loaded == ["partial"]
    assert scorer(load_autoais(backend="llm-judge", judge_model=_NamedLM("given"))) \
        == "llm-judge:given"
    with pytest.raises(ConfigError):
        load_autoais(backend="llm-judge")


CV_RULE = "threshold chosen by 5-fold CV"


def _measured() -> dict[tuple[str, str, float], str]:
    """The llm-judge rows of the committed results/judge/judge_eval.csv, as labels: the plain
    0.5 rule, and the threshold chosen on all items with its cross-validated accuracy."""
    with open(REPO_ROOT / "results" / "judge" / "judge_eval.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["judge"].startswith("llm-judge:")]
    out = {}
    for r in rows:
        cv = r["threshold"] != "0.5"
        key = (r["judge"].removeprefix("llm-judge:"), r["dtype"],
               float(r["full_set_threshold"]) if cv else 0.5)
        out[key] = accuracy_label(float(r["accuracy"]), float(r["accuracy_ci_low"]),
                                  float(r["accuracy_ci_high"]), int(r["n"]),
                                  CV_RULE if cv else "")
    return out


def test_recorded_judge_accuracy_is_the_measured_one() -> None:
    measured = _measured()
    assert len(measured) >= 8 and JUDGE_ACCURACY == measured
    for (name, dtype, threshold), label in JUDGE_ACCURACY.items():
        settings = LLMJudgeScorer(_NamedLM(name, dtype), threshold=threshold).settings()
        assert settings["autoais_judge_accuracy"] == label
        assert "on 120 hand-checked items" in label
    unmeasured = LLMJudgeScorer(_NamedLM("smollm2-135m", "float16")).settings()
    assert unmeasured["autoais_judge_accuracy"].startswith(
        "not measured (smollm2-135m, float16, threshold 0.5")


def test_judge_threshold_applies_to_the_llm_judge_only() -> None:
    ev = load_autoais(backend="llm-judge", lm=_NamedLM("x"), judge_threshold=0.87)
    assert ev.scorer.threshold == 0.87 and ev.settings()["autoais_threshold"] == 0.87
    assert load_autoais(backend="llm-judge", lm=_NamedLM("x")).scorer.threshold == 0.5


def test_accuracy_label_format() -> None:
    assert accuracy_label(0.575, 0.483333, 0.666667, 120) == \
        "57.5% [48.3, 66.7] on 120 hand-checked items"
    assert accuracy_label(0.9, 0.85, 0.95, 10, "cv").endswith("10 hand-checked items (cv)")


def test_riches_tables_show_the_judge_accuracy(tmp_path) -> None:
    from riches.tables import TABLES, fill_row

    for spec in TABLES.values():
        # the judge's accuracy follows the judge, as a column or in the note's settings
        shown = spec["context"] if "autoais_scorer" in spec["context"] \
            else spec.get("note_columns") or []
        assert shown.index("autoais_judge_accuracy") == shown.index("autoais_scorer") + 1
        assert "hand-checked attribution set" in spec["note"]
    label = "50.0% [40.8, 59.2] on 120 hand-checked items"
    new = fill_row({"autoais_scorer": "llm-judge:a", "autoais_judge_accuracy": label}, tmp_path)
    old = fill_row({"autoais_scorer": "llm-judge:b"}, tmp_path)
    t5 = fill_row({"autoais_scorer": "t5:google/x"}, tmp_path)
    assert new["autoais_judge_accuracy"] == label
    assert old["autoais_judge_accuracy"] == "not recorded (an older row)"
    assert "autoais_judge_accuracy" not in t5


def test_best_threshold_and_cross_validation_by_hand() -> None:
    labels = [True, True, False, False]
    scores = [0.9, 0.7, 0.8, 0.2]
    # below all: 2/4; midpoints 0.45: 3/4, 0.75: 2/4, 0.85: 3/4 -> the first best, 0.45
    assert best_threshold(labels, scores) == pytest.approx(0.45)
    assert best_threshold([True, False], [0.6, 0.4]) == pytest.approx(0.5)
    # two groups, two folds: each fold's threshold comes from the other group only
    groups = ["a", "a", "b", "b"]
    preds, ts = cross_validated(groups, [True, False, True, False], [0.9, 0.5, 0.6, 0.2],
                                folds=2)
    assert ts == [pytest.approx(0.4), pytest.approx(0.7)]   # fold 0 = group a, trained on b
    assert preds == [True, True, False, False]
