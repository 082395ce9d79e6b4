"""Prompt formats, output cleaning, the output choice and the fallback rules."""
from __future__ import annotations

from filco.measures import MeasureSpec
from filco.prompts import (
    clean_output,
    code_cxmi_inputs,
    ctx_prompt,
    gen_prompt,
    gen_target,
    psg_prompt,
)
from filco.silver import (
    Example,
    Silver,
    answer_in,
    choose_output,
    ctx_train_target,
    eval_context,
    gen_train_context,
    psg_labels,
    silver_contexts,
)
from filco.split import split_sentences
from filco.tasks import get_task

QA, FEVER, WOW = get_task("nq"), get_task("fever"), get_task("wow")


def test_ctx_and_gen_prompts_exact():
    assert ctx_prompt(QA, "who?", ["p1", "p2"]) == (
        "Given the ['question', 'context'], predict the most helpful sentence in the context."
        "\n\nquestion: who?\ncontext: p1\np2")
    assert gen_prompt(QA, "who?", "ctx") == (
        "Given the ['question', 'context'], predict the answer to the question.\n\n"
        "question: who?\ncontext: ctx")
    # the no-context side of CXMI drops only the context
    assert gen_prompt(QA, "who?", None) == (
        "Given the ['question'], predict the answer to the question.\n\nquestion: who?")
    assert gen_target(QA, "Bizet") == "answer: Bizet"
    assert gen_target(WOW, "hi") == "response: hi"
    assert psg_prompt(QA, "q", "p").endswith("question: q\ncontext: p")


def test_fever_prompt_has_label_instruction_and_claim():
    p = gen_prompt(FEVER, "The sky is green.", "ctx")
    assert p.startswith("Given the ['claim', 'context'], predict the judgement to the claim."
                        "('SUPPORTS' or 'REFUTES')\nIf the 'context' does not provide")
    assert p.endswith("claim: The sky is green.\ncontext: ctx")


def test_code_test_format_puts_context_first():
    p = gen_prompt(QA, "who?", "ctx", fmt="code_test")
    assert p == ("Given the ['context', 'question'], predict the answer to the question in the "
                 "context.\n\ncontext: ctx\nquestion: who?")


def test_code_cxmi_strings():
    with_s, base = code_cxmi_inputs("who?", "S.")
    assert base == ("question: Given the ['context', 'question'], predict the answer to the "
                    "question:who?")
    assert with_s == "context: S.\n" + base


def test_clean_output_keeps_text_after_last_prefix():
    assert clean_output("answer: foo answer: Bizet ") == "Bizet"
    assert clean_output("judgement: SUPPORTS") == "SUPPORTS"
    assert clean_output("plain") == "plain"


def test_choose_output_code_rule():
    # highest-ranked passage containing any answer; within it the first answer in list order
    assert choose_output(["B", "A"], ["x A y", "B and A"]) == "A"
    assert choose_output(["zz", "yy"], ["none"]) == "zz"


def test_fallbacks():
    empty, full = Silver(""), Silver("s1", [(0, 0)], [0])
    # M_gen training: top-1 passage when nothing passed (code), or empty
    assert gen_train_context(empty, ["P1", "P2"], "top1") == "P1"
    assert gen_train_context(empty, ["P1", "P2"], "empty") == ""
    assert gen_train_context(full, ["P1"], "top1") == "s1"
    # M_ctx target: empty string (code); test time: no fallback (code)
    assert ctx_train_target(empty) == ""
    assert ctx_train_target(empty, "top1", ["P1"]) == "P1"
    assert eval_context("", ["P1"], "none") == ""
    assert eval_context("  ", ["P1"], "top1") == "P1"
    assert eval_context("pred", ["P1"], "top1") == "pred"
    assert psg_labels(Silver("x", [(1, 0)], [1]), 3) == [False, True, False]


def test_silver_contexts_strinc_and_lexical():
    ex = Example("q1", "What is the capital of France?", ("Paris",),
                 ("Berlin is big. It is in Germany.", "France is old. Paris is its capital."))
    split = lambda t: split_sentences(t, "regex")
    (s,) = silver_contexts([ex], MeasureSpec.from_mode("strinc"), split)
    assert s.text == "Paris is its capital." and s.spans == [(1, 1)] and s.passages == [1]
    (s,) = silver_contexts([ex], MeasureSpec.from_mode("lexical"), split)
    assert s.empty  # F1("Paris is its capital", "Paris") = 0.4 < 0.5


def test_answer_in_uses_word_boundaries():
    assert answer_in("The Beatles were a band.", ["beatles"])
    assert not answer_in("Concatenate.", ["cat"])
