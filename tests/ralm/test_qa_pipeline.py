"""The QA pipeline end to end with a character-level fake LM and a fake retriever: prompt
assembly, truncation, scoring, resume from samples.jsonl. One slow test runs SmolLM2."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.configcheck import option_file
from ragrepro.deferred import Deferred
from ragrepro.retrieval.base import Hit
from ragrepro.tracking import Run
from ralm import qa as qa_mod


class CharTok:
    """ids = code points; decode joins them back."""

    def __call__(self, text: str) -> dict:
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=True, clean_up_tokenization_spaces=False):
        return "".join(chr(i) for i in ids)


class FakeLM:
    """Answers from a table keyed by the last question in the prompt; records its inputs."""

    name = "fake"

    def __init__(self, answers: dict[str, str], context_size: int = 4096):
        self.tokenizer = CharTok()
        self.answers = answers
        self.context_size = context_size
        self.seen: list[list[int]] = []
        self.kwargs: list[dict] = []

    def encode(self, text, add_bos=None):
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)

    def generate(self, prompts, max_new_tokens, **kw):
        self.kwargs.append({"max_new_tokens": max_new_tokens, **kw})
        out = []
        for p in prompts:
            self.seen.append(list(p))
            text = "".join(chr(i) for i in p)
            q = text.rsplit("Q: ", 1)[-1].split("\n")[0]
            out.append([ord(c) for c in self.answers.get(q, " unknown") + "\nQ: next"])
        return out

    def generate_with_finish(self, prompts, max_new_tokens, **kw):
        # the fake never emits EOS and ignores the budget: every row reads as `length`
        return [(ids, "length") for ids in self.generate(prompts, max_new_tokens, **kw)]


class FakeRetriever:
    def __init__(self):
        self.queries: list[str] = []

    def search(self, queries, k):
        self.queries += queries
        return [[Hit(pid=f"p{i}", title=f"Doc {i}", text=f"text {i} about {q}", score=1.0 / (i + 1))
                 for i in range(k)] for q in queries]


def _write_qa(path: Path) -> None:
    rows = [{"qid": "q1", "question": "Who wrote Hamlet", "answers": ["William Shakespeare"],
             "gold_titles": ["Doc 1"]},
            {"qid": "q2", "question": "Capital of France?", "answers": ["Paris"],
             "gold_titles": ["Elsewhere"]},
            {"qid": "q3", "question": "Largest planet?", "answers": ["Jupiter"]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


class Given(Deferred):
    """A component handed over already built (a fake), in place of a config."""

    def __init__(self, obj: Any, name: str):
        super().__init__({"_target_": "unused", "name": name})
        self.obj = obj

    def build(self, **kwargs: Any) -> Any:
        return self.obj


def _records(path: Path, name: str = "local_qa", split: str = "all", limit: int | None = None):
    return instantiate({"_target_": "ragrepro.data.loaders.load_qa", "name": name,
                        "split": split, "path": str(path), "limit": limit}, _convert_="all")


def _settings(**qa: Any):
    """ralm/conf/ralm/qa.yaml's settings (the defaults live there only), with overrides."""
    node = OmegaConf.merge(OmegaConf.load(option_file("ralm", "qa")).qa, qa)
    return instantiate(node)


def _run_qa(run: Run, path: Path, lm: Any, retriever: Any = None, limit: int | None = None,
            name: str = "local_qa", split: str = "all", **qa: Any):
    """The pipeline as Hydra would call it, with the fakes as its components."""
    from ragrepro.retrieval.corpus import corpus_from_passages

    corpus = Given(corpus_from_passages("fake", []), "fake")
    return qa_mod.run(run, lm=lm, records=_records(path, name, split, limit),
                      settings=_settings(**qa), corpus=corpus,
                      retriever=Given(retriever, "fake"))


ANSWERS = {"who wrote Hamlet?": " William Shakespeare", "capital of France?": " Lyon",
           "largest planet?": " Jupiter."}


def test_pipeline_scores_and_records(tmp_path):
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    lm, ret = FakeLM(ANSWERS), FakeRetriever()
    run = Run("t/qa", "r1", tmp_path / "res")
    run.start()
    res = _run_qa(run, data, lm, ret, num_docs=2)
    assert res.metrics["em"] == pytest.approx(2 / 3)
    assert res.metrics["num_examples"] == 3 and res.metrics["too_long"] == 0
    # gold title recall over records that have gold titles: q1 hit (Doc 1), q2 miss
    assert res.metrics["gold_title_recall"] == pytest.approx(0.5)
    assert ret.queries == ["Who wrote Hamlet", "Capital of France?", "Largest planet?"]
    samples = run.done_samples()
    assert [s["prediction"] for s in samples] == [" William Shakespeare", " Lyon", " Jupiter."]
    assert samples[0]["prompt"] == ("Doc 0\n\ntext 0 about Who wrote Hamlet\n\nDoc 1\n\ntext 1 "
                                    "about Who wrote Hamlet\n\nBased on these texts, answer these "
                                    "questions:\nQ: who wrote Hamlet?\nA:")
    # has_answer: is a gold answer in the prompt? Never here (fake docs lack the answers).
    assert [s["has_answer"] for s in samples] == [0.0, 0.0, 0.0]
    assert all(k["do_sample"] is False for k in lm.kwargs)
    assert all(k["max_new_tokens"] == 10 for k in lm.kwargs)
    assert res.settings["num_docs"] == 2 and res.settings["doc_source"] == "retrieve"


def test_left_truncation_to_context_minus_10(tmp_path):
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    lm = FakeLM(ANSWERS, context_size=40)
    run = Run("t/qa", "r2", tmp_path / "res")
    run.start()
    res = _run_qa(run, data, lm, num_docs=0)
    assert res.metrics["too_long"] == 3
    assert all(len(p) == 30 for p in lm.seen)
    full = "Answer these questions:\nQ: who wrote Hamlet?\nA:"
    assert "".join(map(chr, lm.seen[0])) == full[-30:]
    assert res.metrics["em"] == pytest.approx(2 / 3)  # the question survives the cut


def test_resume_skips_done_questions(tmp_path):
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    run = Run("t/qa", "r3", tmp_path / "res")
    run.start()
    first = FakeLM(ANSWERS)
    _run_qa(run, data, first, limit=2)
    assert len(first.seen) == 2
    # a crash mid-write leaves a torn line; the rerun repairs it and does q3 only
    with open(run.samples_path, "a") as f:
        f.write('{"qid": "q3", "quest')
    second = FakeLM(ANSWERS)
    res = _run_qa(run, data, second)
    assert len(second.seen) == 1
    assert [s["qid"] for s in run.done_samples()] == ["q1", "q2", "q3"]
    assert res.metrics["num_examples"] == 3


def test_dpr_ctxs_are_used_in_order(tmp_path):
    item = {"question": "who wrote hamlet", "answers": ["Shakespeare"],
            "ctxs": [{"id": "1", "title": "Hamlet", "text": "by Shakespeare", "score": 9},
                     {"id": "2", "title": "Play", "text": "a play", "score": 8},
                     {"id": "3", "title": "Other", "text": "x", "score": 7}]}
    path = tmp_path / "nq-test.json"
    path.write_text(json.dumps([item]))
    lm = FakeLM({"who wrote hamlet?": " Shakespeare"})
    run = Run("t/qa", "r4", tmp_path / "res")
    run.start()
    res = _run_qa(run, path, lm, name="nq-open-dpr", split="test", num_docs=2)
    s = run.done_samples()[0]
    assert s["doc_titles"] == ["Hamlet", "Play"]
    assert s["has_answer"] == 1.0 and s["em"] == 1.0
    assert res.settings["doc_source"] == "dataset"


@pytest.mark.slow
def test_smollm_closed_book_one_question(tmp_path, smollm):
    """Real model, real prompts: greedy decoding is deterministic and the answer is the first
    line of the new tokens."""
    run = Run("t/qa", "r5", tmp_path / "res")
    run.start()
    records = instantiate({"_target_": "ragrepro.data.loaders.load_qa", "name": "vital-qa",
                           "split": "test", "limit": 1}, _convert_="all")
    res = qa_mod.run(run, lm=smollm, records=records, settings=_settings(num_docs=0),
                     corpus=Deferred(None), retriever=Deferred(None))
    samples = run.done_samples()
    assert len(samples) == 1 and res.metrics["num_examples"] == 1
    for s in samples:
        assert s["prompt"].startswith("Answer these questions:\nQ: ")
        assert "\n" not in s["prediction"]
        assert s["output"].startswith(s["prediction"])
        ids = smollm.tokenizer(s["prompt"])["input_ids"]
        again = smollm.generate([ids], max_new_tokens=10)[0]
        assert smollm.decode(again, skip_special_tokens=True) == s["output"]


def test_record_with_fewer_docs_than_num_docs_keeps_the_many_docs_template(tmp_path):
    # official eval_qa.py picks the template from --num_docs: a record holding one ctx under
    # num_docs=3 reads "Based on these texts" with the one document it has
    data = tmp_path / "qa.jsonl"
    row = {"qid": "q1", "question": "Who wrote Hamlet", "answers": ["William Shakespeare"],
           "passages": [{"pid": "p0", "title": "Hamlet", "text": "A play."}]}
    data.write_text(json.dumps(row) + "\n")
    run = Run("t/qa", "r9", tmp_path / "res")
    run.start()
    _run_qa(run, data, FakeLM(ANSWERS), num_docs=3, doc_source="dataset")
    (sample,) = run.done_samples()
    assert sample["prompt"] == ("Hamlet\n\nA play.\n\nBased on these texts, answer these "
                                "questions:\nQ: who wrote Hamlet?\nA:")
