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


def test_code_test_fever_as_replace_context_builds_it():
    # get_input_text_fever on the README's M_ctx input (--question_prefix claim, no
    # --answer_prefix judgement): the label list moves before "in the context", no
    # "If the 'context'..." sentence; the claim is right-stripped, the context kept as given
    p = gen_prompt(FEVER, "The sky is green.  ", "ctx ", fmt="code_test")
    assert p == ("Given the ['context', 'claim'], predict the judgement to the claim "
                 "('SUPPORTS' or 'REFUTES') in the context.\n\ncontext: ctx \n"
                 "claim: The sky is green.")
    # M_ctx built with --answer_prefix judgement: its instruction carries the FEVER note,
    # which replace_context keeps after the (replaced) first sentence
    q = gen_prompt(FEVER, "The sky is green.", "ctx", fmt="code_test",
                   ctx_answer_prefix="judgement")
    assert q == ("Given the ['context', 'claim'], predict the judgement to the claim "
                 "('SUPPORTS' or 'REFUTES') in the context.('SUPPORTS' or 'REFUTES')\n"
                 "If the 'context' does not provide enough information to judge the claim, "
                 "use your own knowledge instead.\n\ncontext: ctx\nclaim: The sky is green.")


def test_code_test_wow_as_replace_context_builds_it():
    # get_input_text_wow: its own instruction and blank lines between the three parts
    p = gen_prompt(WOW, "Hi!\nI love dogs. ", "Dogs are pets.", fmt="code_test")
    assert p == ("Given the ['context', 'query'], predict the response to the conversation in "
                 "the context.\n\ncontext: Dogs are pets.\n\nquery: Hi!\nI love dogs.")


def test_code_test_right_strips_the_question_and_keeps_an_empty_context():
    p = gen_prompt(QA, "who? ", "", fmt="code_test")
    assert p.endswith("\n\ncontext: \nquestion: who?")


def test_training_inputs_are_stripped_as_get_inputs_does():
    # get_ict_io returns full_input_text.strip(): a trailing space or an empty passage
    # does not leave "context: " with its space
    assert ctx_prompt(QA, "who?", ["p1 "]).endswith("\ncontext: p1")
    assert ctx_prompt(QA, "who?", [""]).endswith("\ncontext:")
    assert gen_prompt(QA, "who?", "").endswith("question: who?\ncontext:")
    assert gen_prompt(QA, "who?", "s. ").endswith("\ncontext: s.")
    # the M_ctx instruction gets the FEVER note only with --answer_prefix judgement
    assert "If the 'context'" not in ctx_prompt(FEVER, "c", ["p"])
    assert "If the 'context'" in ctx_prompt(FEVER, "c", ["p"], "judgement")


def test_code_cxmi_strings():
    with_s, base = code_cxmi_inputs("who?", "S.")
    assert base == ("question: Given the ['context', 'question'], predict the answer to the "
                    "question:who?")
    assert with_s == "context: S.\n" + base


def test_clean_output_keeps_text_after_last_prefix():
    assert clean_output("answer: foo answer: Bizet ") == "Bizet"
    assert clean_output("judgement: SUPPORTS") == "SUPPORTS"
    assert clean_output("plain") == "plain"
    assert clean_output("Answer: Paris") == "Paris"
    assert clean_output("RESPONSE: hi") == "hi"


def test_official_clean_output():
    from filco.official import eval_clean, llama_clean, official_prediction

    # eval.py folds "Answer" to "answer" before cutting: "Answer: Paris" scores as "Paris"
    assert eval_clean("Answer: Paris") == "Paris"
    assert eval_clean("The above context is (-23.0) helpful. answer: Violet Alva") == "Violet Alva"
    # markers are cut in order answer, response, judgement, score (last occurrence each)
    assert eval_clean("response: a answer: b") == "b"
    assert eval_clean("answer: a Response: b") == "b"
    assert eval_clean("Judgement: SUPPORTS") == "SUPPORTS"
    # only the capitalised spelling is folded; other casings stay
    assert eval_clean("ANSWER: Paris") == "ANSWER: Paris"
    # the fold applies to the whole text, answers included; no marker: not stripped
    assert eval_clean("Answer: The Answer Man") == "The answer Man"
    assert eval_clean(" plain ") == " plain "
    # query_llama.py lower-cases first and cuts at "predictions:"
    assert llama_clean("Predictions: Answer: Paris") == "answer: paris"
    assert official_prediction("Predictions: ANSWER: Paris", "causal") == "paris"
    assert official_prediction("ANSWER: Paris", "seq2seq") == "ANSWER: Paris"
    assert official_prediction("Answer: Paris", "seq2seq") == "Paris"


def test_cxmi_scores_first_answer_in_code_mode():
    from filco.silver import cxmi_output

    ex = Example("q", "who?", ("Bizet", "Georges Bizet"), ("Georges Bizet wrote it.",), "nq")
    # paper: M_gen's target (choose_output: the first answer found in the top passage)
    assert cxmi_output(MeasureSpec.from_mode("cxmi", "paper"), ex) == "Bizet"
    ex2 = Example("q", "who?", ("G. Bizet", "Bizet"), ("Bizet wrote it.",), "nq")
    assert cxmi_output(MeasureSpec.from_mode("cxmi", "paper"), ex2) == "Bizet"
    # code: measure_ctxs.calc_cxmi scores answers[0], whatever the passages hold
    assert cxmi_output(MeasureSpec.from_mode("cxmi", "code"), ex2) == "G. Bizet"


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
