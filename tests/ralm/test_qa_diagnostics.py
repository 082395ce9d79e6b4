"""RALM QA records why each answer stopped (ragrepro.generation): the first line's newline
is the stop string, a first line still open at the budget is `length`, an empty first line
is an empty prediction, a left-truncated prompt says so; the row carries the rates."""
from __future__ import annotations

import pytest

from ragrepro.errors import ConfigError
from ragrepro.tracking import Run
from ralm import qa as qa_mod
from tests.ralm.test_qa_pipeline import ANSWERS, FakeLM, _run_qa, _settings, _write_qa


class BudgetLM(FakeLM):
    """Answers as FakeLM, cut to max_new_tokens characters, EOS (id 0) where the table says."""

    eos_id = 0

    def generate_with_finish(self, prompts, max_new_tokens, **kw):
        out = []
        for p in prompts:
            self.seen.append(list(p))
            q = "".join(chr(i) for i in p).rsplit("Q: ", 1)[-1].split("\n")[0]
            text = self.answers.get(q, " unknown\nQ:")
            ids = [ord(c) for c in text][:max_new_tokens]
            if text.endswith("<eos>"):
                ids = [ord(c) for c in text[:-5]]
                out.append((ids, "eos"))
            else:
                out.append((ids, "length" if len(ids) >= max_new_tokens else "stop"))
        return out


def test_finish_of_reads_the_first_line_as_the_answer() -> None:
    assert qa_mod.finish_of("length", " Paris\nQ: next") == "stop"
    assert qa_mod.finish_of("length", " William Shakes") == "length"
    assert qa_mod.finish_of("eos", " Paris") == "eos"
    assert qa_mod.finish_of("stop", "") == "stop"


def test_samples_and_row_carry_the_diagnostics(tmp_path) -> None:
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    # q1 ends its line within 10 tokens; q2 runs past the budget; q3 answers nothing
    lm = BudgetLM({"who wrote Hamlet?": " Shakes\nQ:", "capital of France?": " Lyon is the city",
                   "largest planet?": "<eos>"})
    run = Run("t/qa", "d1", tmp_path / "res")
    run.start()
    res = _run_qa(run, data, lm, num_docs=0)
    gens = [s["generation"]["answer"] for s in run.done_samples()]
    assert [g["finish"] for g in gens] == ["stop", "length", "eos"]
    assert [g["output_tokens"] for g in gens] == [10, 10, 0]
    assert [g["empty"] for g in gens] == [False, False, True]
    prompt = "Answer these questions:\nQ: who wrote Hamlet?\nA:"
    assert gens[0]["prompt_tokens"] == len(prompt) and gens[0]["truncated"] is False
    m = res.metrics
    assert m["gen_answer_length"] == pytest.approx(1 / 3)
    assert m["gen_answer_stop"] == pytest.approx(1 / 3)
    assert m["gen_answer_eos"] == pytest.approx(1 / 3)
    assert m["gen_answer_empty"] == pytest.approx(1 / 3)
    assert m["gen_answer_truncated"] == 0.0
    assert m["gen_answer_output_tokens"] == pytest.approx(20 / 3)


def test_left_truncation_is_recorded_per_sample(tmp_path) -> None:
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    run = Run("t/qa", "d2", tmp_path / "res")
    run.start()
    res = _run_qa(run, data, BudgetLM(ANSWERS, context_size=40), num_docs=0)
    assert all(s["generation"]["answer"]["truncated"] for s in run.done_samples())
    assert all(s["generation"]["answer"]["prompt_tokens"] == 30 for s in run.done_samples())
    assert res.metrics["gen_answer_truncated"] == 1.0


def test_a_resumed_run_reads_records_written_before_the_diagnostics(tmp_path) -> None:
    data = tmp_path / "qa.jsonl"
    _write_qa(data)
    run = Run("t/qa", "d3", tmp_path / "res")
    run.start()
    old = {"qid": "q1", "question": "Who wrote Hamlet", "answers": ["William Shakespeare"],
           "hops": 1, "split": "all", "gold_titles": ["Doc 1"], "doc_pids": [],
           "doc_titles": [], "gold_in_docs": None, "prompt": "p", "prompt_tokens": 1,
           "truncated": False, "generation": " William Shakespeare\n",
           "prediction": " William Shakespeare", "em": 1.0, "has_answer": 0.0, "seconds": 0.1}
    run.add_sample(old)
    res = _run_qa(run, data, BudgetLM(ANSWERS), num_docs=0)
    # the old record counts in EM, and only the two new ones in the diagnostics
    assert res.metrics["em"] == pytest.approx(2 / 3)
    assert res.metrics["gen_answer_stop"] == pytest.approx(1.0)
    assert qa_mod.migrate_sample(old)["output"] == " William Shakespeare\n"


def test_the_budget_check_refuses_one_below_a_demonstration(monkeypatch) -> None:
    """With a demonstration answer in the prompt, qa.max_new_tokens must hold it (here 12
    characters with the character tokenizer); the shipped zero-shot prompts need none."""
    lm = FakeLM({})
    assert qa_mod.check_qa_budget(lm, _settings(max_new_tokens=1)) == 0
    monkeypatch.setattr(qa_mod, "DEMONSTRATIONS", (" Paris", " Saturn moon"))
    assert qa_mod.check_qa_budget(lm, _settings(max_new_tokens=12)) == 12
    with pytest.raises(ConfigError, match=r"qa.max_new_tokens=10 .*Set qa.max_new_tokens=12"):
        qa_mod.check_qa_budget(lm, _settings(max_new_tokens=10))
