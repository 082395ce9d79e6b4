"""The embedded hand-written QA set over wiki-vital: counts, grounding, structure, splits."""
from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from ragrepro.data.loaders import load_qa, vital_qa_path
from ragrepro.data.vital import corpus_passages, heldout_split


@pytest.fixture(scope="module")
def rows():
    return [json.loads(line) for line in vital_qa_path().read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def leads():
    return {p.title: p.text for p in corpus_passages()}


def test_counts(rows):
    hops = Counter(r["hops"] for r in rows)
    assert hops[1] >= 200 and hops[2] >= 60
    assert set(hops) == {1, 2}


def test_fields_and_unique_ids(rows):
    fields = {"qid", "question", "answers", "gold_titles", "hops", "split", "bridge_entity"}
    for r in rows:
        assert fields <= set(r), r["qid"]
        assert r["answers"] and all(isinstance(a, str) and a.strip() for a in r["answers"])
    assert len({r["qid"] for r in rows}) == len(rows)
    assert len({r["question"] for r in rows}) == len(rows)


def test_gold_titles_are_corpus_articles_not_heldout(rows, leads):
    for r in rows:
        assert len(r["gold_titles"]) == r["hops"], r["qid"]
        for t in r["gold_titles"]:
            assert t in leads, (r["qid"], t)
            assert heldout_split(t) is None, (r["qid"], t)


def test_every_answer_occurs_in_its_gold_passage(rows, leads):
    for r in rows:
        gold = leads[r["gold_titles"][-1]]  # the second passage for bridge questions
        for a in r["answers"]:
            assert a in gold, (r["qid"], a)


def test_bridge_structure(rows, leads):
    bridges = [r for r in rows if r["hops"] == 2]
    for r in bridges:
        first, second = r["gold_titles"]
        assert first != second
        assert r["bridge_entity"] in leads[first], r["qid"]
        assert r["bridge_entity"] == second, r["qid"]
        assert r["bridge_entity"].lower() not in r["question"].lower(), r["qid"]
    assert all(r["bridge_entity"] is None for r in rows if r["hops"] == 1)


def _generator():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "make_vital_qa", Path(__file__).resolve().parents[2] / "scripts" / "make_vital_qa.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_gold_article_is_shared_across_splits(rows):
    # embedded-v1 split by qid: 17 of 62 test questions shared a gold article with train
    by_split: dict[str, set[str]] = {}
    for r in rows:
        by_split.setdefault(r["split"], set()).update(r["gold_titles"])
    assert set(by_split) == {"train", "dev", "test"}
    assert not by_split["train"] & by_split["test"]
    assert not by_split["train"] & by_split["dev"]
    assert not by_split["dev"] & by_split["test"]
    share = Counter(r["split"] for r in rows)
    n = len(rows)
    assert 0.5 < share["train"] / n < 0.7 and 0.12 < share["dev"] / n < 0.28
    assert 0.12 < share["test"] / n < 0.28
    assert {h for r in rows if r["split"] == "test" for h in [r["hops"]]} == {1, 2}


def test_article_groups_join_questions_through_shared_articles():
    mod = _generator()
    # q0-q1 share B, q1-q2 share C: one group rooted at the smallest title "A"; q3 alone
    roots = mod.article_groups([["B", "A"], ["C", "B"], ["C"], ["Z"]])
    assert roots == ["A", "A", "A", "Z"]
    splits = mod.assign_splits([["B", "A"], ["C", "B"], ["C"], ["Z"]], pinned=frozenset())
    assert splits[:3] == [mod.split_of("A")] * 3 and splits[3] == mod.split_of("Z")
    # a pinned title pulls its whole group into train
    assert mod.assign_splits([["Y"], ["Y", "X"]], pinned=frozenset({"X"})) == ["train"] * 2
    # the hash rule itself: sha256 hex prefix mod 10, 0-5 train, 6-7 dev, 8-9 test
    b = int(hashlib.sha256(b"Z").hexdigest()[:8], 16) % 10
    assert mod.split_of("Z") == ("train" if b < 6 else "dev" if b < 8 else "test")


def test_prompt_demonstration_articles_are_train_only(rows):
    from omegaconf import OmegaConf

    from ragrepro.configcheck import option_file

    demo_titles = {st["title"] for name in ("single_hop", "multi_hop") for ex in OmegaConf.load(
        option_file("riches/prompts", name))["examples"] for st in ex["steps"]}
    assert demo_titles == set(_generator().PINNED_TRAIN)
    for r in rows:
        if demo_titles & set(r["gold_titles"]):
            assert r["split"] == "train", r["qid"]


def test_variant_names_the_file_version():
    from pathlib import Path

    from omegaconf import OmegaConf

    from ragrepro.data.loaders import VITAL_QA_VERSION

    conf = Path(__file__).resolve().parents[2] / "conf" / "dataset"
    for name in ("vital-qa", "vital-qa-bridge"):
        assert OmegaConf.load(conf / f"{name}.yaml").variant == VITAL_QA_VERSION == "embedded-v2"


def test_loader_filters(rows):
    test = load_qa("vital-qa", "test")
    assert len(test) == sum(r["split"] == "test" for r in rows)
    bridge = load_qa("vital-qa-bridge", "all")
    assert len(bridge) == sum(r["hops"] == 2 for r in rows)
    assert all(r.hops == 2 and len(r.gold_titles) == 2 for r in bridge)
    assert len(load_qa("vital-qa", "all", hops=1)) == sum(r["hops"] == 1 for r in rows)
    assert [r.qid for r in load_qa("vital-qa", "test", limit=5)] == [r.qid for r in test[:5]]


def test_generator_script_reproduces_the_file(rows):
    built, problems = _generator().build()
    assert problems == []
    assert built == rows
