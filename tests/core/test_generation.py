"""Generation diagnostics: finish reasons and row rates, by hand-counted examples."""
import pytest

from ragrepro.generation import finish_reason, record, summarize
from ragrepro.models.lm import _unpad


def test_finish_reason_eos_wins_over_full_budget():
    assert finish_reason([5, 6, 2], eos_ids=2, max_new_tokens=3) == "eos"
    assert finish_reason([5, 6, 7], eos_ids=2, max_new_tokens=3) == "length"
    assert finish_reason([5, 6], eos_ids=[2, 9], max_new_tokens=3) == "stop"
    assert finish_reason([5, 6, 7], eos_ids=None, max_new_tokens=3, stopped=True) == "stop"


def test_unpad_keeps_one_eos_when_pad_is_eos():
    # pad == eos (2): the row ended at its first 2, the rest is padding
    assert _unpad([5, 2, 2, 2], pad=2, eos=2) == [5, 2]
    assert finish_reason(_unpad([5, 2, 2, 2], 2, 2), 2, 4) == "eos"
    # a row that filled the budget without ending
    assert finish_reason(_unpad([5, 6, 7, 8], 2, 2), 2, 4) == "length"
    # pad 0 != eos 2: padding after an EOS is dropped, the EOS stays
    assert _unpad([5, 2, 0, 0], pad=0, eos=2) == [5, 2]


def test_record_marks_empty_prediction_and_rejects_unknown_reason():
    rec = record("length", 40, 16, truncated=True, prediction="  ")
    assert rec == {"finish": "length", "prompt_tokens": 40, "output_tokens": 16,
                   "truncated": True, "empty": True}
    with pytest.raises(ValueError, match="finish='timeout'"):
        record("timeout", 1, 1)


def test_summarize_rates_per_stage_and_diag_means():
    samples = [
        {"generation": {"answer": record("length", 10, 8, prediction="")},
         "diag": {"ctx_empty": True, "keys_opened": 3}},
        {"generation": {"answer": record("eos", 10, 2, prediction="Paris")},
         "diag": {"ctx_empty": False, "keys_opened": 1}},
        {"generation": {"answer": record("eos", 12, 4, truncated=True, prediction="x"),
                        "filter": record("stop", 30, 5, prediction="s")},
         "diag": {"ctx_empty": False, "keys_opened": None}},
        {"question": "no generation recorded"},
    ]
    out = summarize(samples)
    assert out["gen_answer_length"] == pytest.approx(1 / 3)
    assert out["gen_answer_eos"] == pytest.approx(2 / 3)
    assert out["gen_answer_empty"] == pytest.approx(1 / 3)
    assert out["gen_answer_truncated"] == pytest.approx(1 / 3)
    assert out["gen_answer_output_tokens"] == pytest.approx(14 / 3)
    assert out["gen_filter_stop"] == 1.0 and out["gen_filter_length"] == 0.0
    assert out["diag_ctx_empty"] == pytest.approx(1 / 3)
    assert out["diag_keys_opened"] == pytest.approx(2.0)  # the None is left out


def test_check_budget_names_key_and_needed_value():
    from ragrepro.errors import ConfigError
    from ragrepro.generation import check_budget

    encode = str.split  # one token per word
    outputs = ["Paris", "<< A >> << B C >> Answer: 1947", "short one"]  # 9, 1, 2 words
    assert check_budget("riches.max_new_tokens", 9, outputs, encode) == 9
    with pytest.raises(ConfigError, match=r"riches.max_new_tokens=8 .*\(9 tokens.*Set "
                                          r"riches.max_new_tokens=9 or more"):
        check_budget("riches.max_new_tokens", 8, outputs, encode)
