"""In-Context RALM QA: prompt formats, question normalisation, truncation, answer extraction,
checked against the official eval_qa.py behaviour (reference §5)."""
from __future__ import annotations

import pytest

from ragrepro.errors import ConfigError
from ralm.prompts import normalize_question, qa_prompt
from ralm.qa import first_line, left_truncate, strip_by_chars


def test_zero_docs_prompt():
    assert qa_prompt("who wrote hamlet?") == "Answer these questions:\nQ: who wrote hamlet?\nA:"


def test_one_doc_prompt():
    got = qa_prompt("who wrote hamlet?", [("Hamlet", "Hamlet is a tragedy by Shakespeare.")])
    assert got == ("Hamlet\n\nHamlet is a tragedy by Shakespeare.\n\n"
                   "Based on this text, answer these questions:\nQ: who wrote hamlet?\nA:")


def test_many_docs_prompt():
    got = qa_prompt("q?", [("T1", "x1"), ("T2", "line a\nline b"), ("T3", "x3")])
    assert got == ("T1\n\nx1\n\nT2\n\nline a\nline b\n\nT3\n\nx3\n\n"
                   "Based on these texts, answer these questions:\nQ: q?\nA:")
    two = qa_prompt("q?", [("A", "a"), ("B", "b")])
    assert two == "A\n\na\n\nB\n\nb\n\nBased on these texts, answer these questions:\nQ: q?\nA:"


def test_template_follows_num_docs_not_the_documents_a_record_has():
    # eval_qa.py build_qa_prompt(example, num_docs=k): k >= 2 takes "these texts" even when
    # the record has fewer ctxs than k; only num_docs == 1 uses "this text"
    short = qa_prompt("q?", [("A", "a")], num_docs=5)
    assert short == "A\n\na\n\nBased on these texts, answer these questions:\nQ: q?\nA:"
    assert qa_prompt("q?", [("A", "a"), ("B", "b"), ("C", "c")], num_docs=2) == \
        "A\n\na\n\nB\n\nb\n\nBased on these texts, answer these questions:\nQ: q?\nA:"
    assert qa_prompt("q?", [("A", "a"), ("B", "b")], num_docs=1) == \
        "A\n\na\n\nBased on this text, answer these questions:\nQ: q?\nA:"
    assert qa_prompt("q?", [("A", "a")], num_docs=0) == "Answer these questions:\nQ: q?\nA:"
    with pytest.raises(ConfigError, match="num_docs=1"):
        qa_prompt("q?", [], num_docs=1)


@pytest.mark.parametrize("raw,expected", [
    ("Who wrote Hamlet", "who wrote Hamlet?"),
    ("who wrote Hamlet?", "who wrote Hamlet?"),
    ("NASA was founded when?", "nASA was founded when?"),  # official: first character only
    ("Where is Paris?", "where is Paris?"),
])
def test_question_normalisation(raw, expected):
    assert normalize_question(raw) == expected


def test_left_truncation_keeps_the_end():
    assert left_truncate(list(range(10)), 4) == ([6, 7, 8, 9], True)
    assert left_truncate([1, 2, 3], 3) == ([1, 2, 3], False)
    assert left_truncate([1, 2], 5) == ([1, 2], False)
    with pytest.raises(ConfigError):
        left_truncate([1], 0)


def test_answer_is_first_line():
    assert first_line(" Paris\nQ: what is next?\nA:") == " Paris"
    assert first_line("\nParis") == ""  # the official code keeps an empty first line
    assert first_line("William Shakespeare") == "William Shakespeare"


def test_official_char_stripping():
    prompt = "Answer these questions:\nQ: x?\nA:"
    assert strip_by_chars(prompt + " Paris\nQ:", prompt) == " Paris\nQ:"


def qa_settings(qa: dict):
    """The QA settings as the pipeline gets them: ralm/conf/ralm/qa.yaml (where the defaults
    live) with `qa` merged in, built by ragrepro.pipeline (errors become ConfigError)."""
    from omegaconf import OmegaConf

    from ragrepro.configcheck import option_file
    from ragrepro.pipeline import build_pipeline

    node = OmegaConf.merge(OmegaConf.load(option_file("ralm", "qa")).qa, qa)
    return build_pipeline(OmegaConf.create({"qa": node, "pipeline": "${qa}"}))


def test_settings_validation():
    assert qa_settings({}).max_new_tokens == 10
    assert qa_settings({}).context_margin == 10
    with pytest.raises(ConfigError, match="num_doc"):
        qa_settings({"num_doc": 2})
    with pytest.raises(ConfigError):
        qa_settings({"strip_prompt": "words"})
