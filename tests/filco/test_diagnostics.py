"""FilCo's per-sample diagnostics (issue 22): the four context facts on hand-made passages,
the filter and generator generation records, the budget check, and the switch labels."""
from __future__ import annotations

import json
from functools import partial

import pytest

from filco import pipeline, prompts
from filco.diagnostics import context_diag, has_answer, is_silver, made_of_sentences
from filco.resources import Budgets, Labelled
from filco.settings import FallbackSettings, variant_label
from filco.silver import Example, Silver
from filco.split import split_sentences
from filco.tasks import get_task
from filco.variants import FilCo
from ragrepro.errors import ConfigError
from ragrepro.generation import summarize
from tests.filco import test_routing as routing
from tests.filco.test_routing import TEST, TRAIN, FakeLM, filco_settings, nq_setup

setup = routing.setup  # the routing tests' fixture: fake models, one run per call

SPLIT = partial(split_sentences, splitter="pysbd")
PASSAGES = ("Bizet wrote Carmen. It premiered in Paris in 1875.", "Carmen is an opera.")


# -- the four facts, hand-made passages ---------------------------------------------------
def test_made_of_sentences_accepts_whole_sentences_in_any_order():
    sents = ["Bizet wrote Carmen.", "It premiered in Paris in 1875.", "Carmen is an opera."]
    assert made_of_sentences("It premiered in Paris in 1875.", sents)
    assert made_of_sentences("Carmen is an opera. Bizet wrote Carmen.", sents)
    assert made_of_sentences("Bizet wrote Carmen.\nCarmen is an opera.", sents)  # newline join
    assert made_of_sentences("  Bizet   wrote Carmen. ", sents)                  # whitespace


def test_made_of_sentences_refuses_edits_fragments_and_empty():
    sents = ["Bizet wrote Carmen.", "It premiered in Paris in 1875."]
    assert not made_of_sentences("Bizet wrote Carmen", sents)            # full stop lost
    assert not made_of_sentences("Bizet composed Carmen.", sents)        # one word changed
    assert not made_of_sentences("It premiered in Paris.", sents)        # a shortened copy
    assert not made_of_sentences("Bizet wrote Carmen. Verdi did not.", sents)  # an addition
    assert not made_of_sentences("", sents)
    assert not made_of_sentences("Bizet wrote Carmen.", [])


def test_made_of_sentences_is_not_fooled_by_a_sentence_that_prefixes_another():
    # a greedy match of "A b." first would strand "c. D."; the whole text is "A b. c." + "D."
    assert made_of_sentences("A b. c. D.", ["A b.", "A b. c.", "D."])
    assert not made_of_sentences("A b. c. D.", ["A b.", "D."])


def test_has_answer_uses_squad_normalisation_on_whole_tokens():
    assert has_answer("It premiered in PARIS, in 1875.", ["paris"])
    assert has_answer("The Beatles played.", ["Beatles"])          # articles and case
    assert not has_answer("Parisian audiences", ["Paris"])          # not a whole token
    assert not has_answer("", ["Paris"])
    assert has_answer("in 1875", ["Paris", "1875"])                 # any of the answers


def test_is_silver_compares_up_to_whitespace_and_none_when_unknown():
    assert is_silver("Bizet wrote Carmen.", " Bizet  wrote Carmen.")
    assert not is_silver("Bizet wrote Carmen.", "Carmen is an opera.")
    assert is_silver("", "")                      # both empty: the filter did what it learned
    assert is_silver("Bizet wrote Carmen.", None) is None


def test_context_diag_of_a_verbatim_answer_sentence_an_empty_and_a_paraphrase():
    silver = "It premiered in Paris in 1875."
    assert context_diag(silver, PASSAGES, ["Paris"], SPLIT, silver) == {
        "ctx_empty": False, "ctx_from_passage": True, "ctx_has_answer": True,
        "ctx_is_silver": True}
    assert context_diag("", PASSAGES, ["Paris"], SPLIT, silver) == {
        "ctx_empty": True, "ctx_from_passage": False, "ctx_has_answer": False,
        "ctx_is_silver": False}
    assert context_diag("Carmen opened in Paris.", PASSAGES, ["Paris"], SPLIT) == {
        "ctx_empty": False, "ctx_from_passage": False, "ctx_has_answer": True,
        "ctx_is_silver": None}


# -- the pipeline records them ------------------------------------------------------------
def _filter_says(monkeypatch, by_question: dict[str, str]) -> None:
    """The fake M_ctx answers per test question; the generator always says Paris."""
    def respond(self, prompt):
        if self.role == "ctx":
            return next(v for q, v in by_question.items() if q in prompt)
        return FakeLM.respond_default(self, prompt)

    monkeypatch.setattr(FakeLM, "respond_default", FakeLM.respond, raising=False)
    monkeypatch.setattr(FakeLM, "respond", respond)


def test_filco_records_filter_and_answer_stages_and_context_facts(setup, monkeypatch, tmp_path):
    # e1: the filter copies the answer sentence (not the silver one: that is the first match);
    # e2: it outputs nothing, and e2's silver context is empty too
    _filter_says(monkeypatch, {TEST[0].question: "Paris is the capital.",
                               TEST[1].question: ""})
    records, _ = setup("filco", run_id="diag")
    assert [r["diag"] for r in records] == [
        {"ctx_empty": False, "ctx_from_passage": True, "ctx_has_answer": True,
         "ctx_is_silver": False},
        {"ctx_empty": True, "ctx_from_passage": False, "ctx_has_answer": False,
         "ctx_is_silver": True}]
    filt = [r["generation"]["filter"] for r in records]
    assert [f["empty"] for f in filt] == [False, True]
    assert [f["output_tokens"] for f in filt] == [len("Paris is the capital."), 0]
    # the fake tokenizer is one token per character: the prompt is the M_ctx input + "\n"
    prompt = prompts.ctx_prompt(get_task("nq"), TEST[0].question, TEST[0].passages)
    assert filt[0]["prompt_tokens"] == len(prompt) + 1 and filt[0]["truncated"] is False
    assert [r["generation"]["answer"]["finish"] for r in records] == ["eos", "eos"]
    rates = summarize(records)
    assert rates["diag_ctx_empty"] == 0.5 and rates["diag_ctx_has_answer"] == 0.5
    assert rates["gen_filter_empty"] == 0.5 and rates["gen_answer_eos"] == 1.0
    # the same facts are in samples.jsonl, the records `ragrepro samples` reads
    lines = (tmp_path / "results" / "filco" / "test" / "tmp_diag" / "samples.jsonl").read_text()
    written = [json.loads(x) for x in lines.splitlines()]
    assert [w["diag"] for w in written] == [r["diag"] for r in records]
    assert [w["filtered_context"] for w in written] == ["Paris is the capital.", ""]


def test_test_top1_switch_feeds_the_passage_but_the_row_still_counts_the_empty_filter(
        setup, monkeypatch):
    _filter_says(monkeypatch, {TEST[0].question: "Paris is the capital.",
                               TEST[1].question: ""})
    records, _ = setup("filco", run_id="top1", **{"fallback.test": "top1"})
    assert records[1]["context"] == TEST[1].passages[0]   # the generator read the passage
    assert records[1]["context_empty"] is False
    assert records[1]["diag"]["ctx_empty"] is True         # the filter still gave nothing


def test_a_truncated_prompt_is_recorded(setup):
    records, _ = setup("full", run_id="cut", max_input_tokens=40)
    assert [r["generation"]["answer"]["truncated"] for r in records] == [True, True]
    assert records[0]["generation"]["answer"]["prompt_tokens"] == 40


# -- budgets ------------------------------------------------------------------------------
def test_a_filter_budget_below_the_longest_silver_context_is_refused(setup):
    # the training silver context "Paris is the capital of France." is 31 characters, one
    # token each under the fake tokenizer, which has no EOS
    with pytest.raises(ConfigError, match=r"filco.ctx_max_new_tokens=30 .*Set "
                                          r"filco.ctx_max_new_tokens=31 or more"):
        setup("filco", run_id="b1", ctx_max_new_tokens=30)
    setup("filco", run_id="b2", ctx_max_new_tokens=31)
    # Full and Silver run no filter: its budget is not theirs to check
    setup("silver", run_id="b3", ctx_max_new_tokens=1)


def test_a_generator_budget_below_its_longest_training_target_is_refused(setup):
    # "answer: Paris" (13 characters)
    with pytest.raises(ConfigError, match=r"filco.gen_max_new_tokens=12 .*=13 or more"):
        setup("full", run_id="g1", gen_max_new_tokens=12)
    setup("full", run_id="g2", gen_max_new_tokens=13)
    setup("silver", run_id="g3", gen_max_new_tokens=1, stage="context")  # no generator


def _budgets(uncapped=None, **over) -> Budgets:
    """Budget checks of a FilCo run with the fake LM (one token per character, no EOS)."""
    return Budgets(nq_setup(filco_settings("filco", **over), FakeLM("base", {})), uncapped)


def test_under_the_rehearsal_cap_the_check_reads_the_configured_budget():
    # the rehearsal caps filco.ctx_max_new_tokens to 16 for speed and records the configured
    # value (rehearsal.uncapped): the check must judge the value a real run would use
    data = Labelled(TRAIN, [], [Silver("Paris is the capital of France.")], [])  # 31 tokens
    with pytest.raises(ConfigError, match="filco.ctx_max_new_tokens=16"):
        FilCo().filter_budgets(_budgets(ctx_max_new_tokens=16), data)
    ok = _budgets({"filco.ctx_max_new_tokens": 512}, ctx_max_new_tokens=16)
    assert FilCo().filter_budgets(ok, data) == {"filco.ctx_max_new_tokens": 31}
    low = _budgets({"filco.ctx_max_new_tokens": 20}, ctx_max_new_tokens=16)
    with pytest.raises(ConfigError, match="filco.ctx_max_new_tokens=20 "):
        FilCo().filter_budgets(low, data)


def test_the_budget_needs_only_what_training_kept_of_a_target():
    # a target cut at the role's max_target_tokens was never learnt past the cut (nor its
    # EOS): a budget reaching the cut holds everything the model was trained to emit
    cut = _budgets(**{"train.gen.max_target_tokens": 8, "gen_max_new_tokens": 8})
    assert pipeline.check_gen_budget(cut, TRAIN) == {"filco.gen_max_new_tokens": 8}
    with pytest.raises(ConfigError, match="filco.gen_max_new_tokens=12 .*=13 or more"):
        pipeline.check_gen_budget(_budgets(gen_max_new_tokens=12), TRAIN)


def test_drop_leaves_empty_silver_targets_out_of_the_filter_pairs():
    exs = [TRAIN[0], Example("t2", "q?", ("x",), ("No answer here.",), "nq")]
    sil = [Silver("Paris is the capital of France."), Silver("")]
    drop = nq_setup(filco_settings("filco_ctx_drop"), FakeLM("base", {}))
    assert [t for _, t in FilCo.ctx_pairs(drop, exs, sil)] == ["Paris is the capital of France."]
    empty = nq_setup(filco_settings("filco"), FakeLM("base", {}))
    assert [t for _, t in FilCo.ctx_pairs(empty, exs, sil)] == [
        "Paris is the capital of France.", ""]


# -- switch labels ------------------------------------------------------------------------
def test_switches_name_what_differs_from_the_released_code():
    assert FallbackSettings("top1", "empty", "none").switches() == []
    assert FallbackSettings("top1", "empty", "top1").switches() == ["fallback.test=top1"]
    assert FallbackSettings("top1", "drop", "none").switches() == ["fallback.ctx_target=drop"]
    assert variant_label("filco", ["fallback.test=top1"]) == "filco [switch fallback.test=top1]"
    assert variant_label("full", []) == "full"
    with pytest.raises(ConfigError, match="filco.fallback.test='first'"):
        FallbackSettings("top1", "empty", "first")
