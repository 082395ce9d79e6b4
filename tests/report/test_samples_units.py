"""ragrepro.report.samples: which per-sample records feed which metric, checked against the
number the run recorded."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ragrepro.report.samples import StatsSettings, interval_for, paired_for, units_for


def _write(d: Path, name: str, records: list[dict]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text("".join(json.dumps(r) + "\n" for r in records))
    return d


def test_qa_metric_stored_as_percent_gets_scale_100(tmp_path):
    d = _write(tmp_path / "r", "samples.jsonl",
               [{"qid": f"q{i}", "score": s} for i, s in enumerate([1, 0, 1, 1])])
    u = units_for(d, {"score": 75.0}, "score")
    assert u is not None and u.scale == 100.0 and u.n == 4
    assert u.estimate() == pytest.approx(75.0)
    assert units_for(d, {"score": 0.75}, "score").scale == 1.0


def test_a_field_that_does_not_reproduce_the_recorded_metric_gives_no_interval(tmp_path):
    d = _write(tmp_path / "r", "samples.jsonl", [{"qid": "a", "em": 1}, {"qid": "b", "em": 0}])
    assert units_for(d, {"em": 0.9}, "em") is None
    assert interval_for(d, {"em": 0.9}, "em") is None
    assert units_for(d, {"em": 0.5}, "f1") is None          # no such per-sample field


def test_null_values_are_left_out_like_the_pipeline_mean(tmp_path):
    d = _write(tmp_path / "r", "samples.jsonl", [{"qid": "a", "gold_title_recall": 1.0},
                                                 {"qid": "b", "gold_title_recall": None},
                                                 {"qid": "c", "gold_title_recall": 0.5}])
    u = units_for(d, {"gold_title_recall": 0.75}, "gold_title_recall")
    assert u is not None and u.keys == ("a", "c")


def test_word_perplexity_from_windows_reproduces_the_run_and_pairs_blocks(tmp_path):
    wins = [{"text": 0, "window": i, "nll_sum": x, "n_scored": 16}
            for i, x in enumerate([30.0, 40.0, 50.0, 20.0])]
    metrics = {"ppl_word": math.exp(140 / 50), "n_words": 50, "ppl_token": math.exp(140 / 64),
               "n_tokens": 64}
    d = _write(tmp_path / "base", "samples.jsonl", wins)
    st = StatsSettings(block_tokens=32, resamples=200)
    ci = interval_for(d, metrics, "ppl_word", st)
    assert ci.estimate == pytest.approx(metrics["ppl_word"]) and ci.n == 2
    assert interval_for(d, metrics, "ppl_token", st).estimate == pytest.approx(
        metrics["ppl_token"])
    # the same run against itself: zero gain, not distinguishable from zero
    t, why = paired_for(d, metrics, d, metrics, "ppl_word", "rel", st)
    assert why == "" and t.estimate == 0.0 and t.includes_zero


def test_paired_runs_on_different_examples_say_so(tmp_path):
    a = _write(tmp_path / "a", "samples.jsonl", [{"qid": "q1", "em": 1}, {"qid": "q2", "em": 0}])
    b = _write(tmp_path / "b", "samples.jsonl", [{"qid": "q1", "em": 1}, {"qid": "q3", "em": 0}])
    t, why = paired_for(a, {"em": 0.5}, b, {"em": 0.5}, "em")
    assert t is None and "different examples" in why


def test_autoais_units_come_from_autoais_jsonl_missing_score_counts_zero(tmp_path):
    d = _write(tmp_path / "r", "autoais.jsonl",
               [{"qid": "a", "attributed": True, "nli_score": 0.9},
                {"qid": "b", "attributed": False, "nli_score": None}])
    assert units_for(d, {"autoais_substitute": 0.5}, "autoais_substitute").n == 2
    u = units_for(d, {"autoais_substitute_mean_score": 0.45}, "autoais_substitute_mean_score")
    assert u is not None and u.values.tolist() == [0.9, 0.0]


def test_verbatim_rate_is_a_ratio_of_per_question_sums(tmp_path):
    d = _write(tmp_path / "r", "samples.jsonl",
               [{"qid": "a", "n_keys": 3, "keys_verbatim": 3},
                {"qid": "b", "n_keys": 1, "keys_verbatim": 0}])
    u = units_for(d, {"verbatim_rate": 0.75}, "verbatim_rate")
    assert u is not None and u.estimate() == pytest.approx(0.75)
    assert units_for(d, {"keys_per_answer": 2.0}, "keys_per_answer").estimate() == 2.0


def test_relative_gain_over_a_zero_baseline_gives_no_test_and_says_why(tmp_path):
    a = _write(tmp_path / "a", "samples.jsonl", [{"qid": "q1", "em": 1}, {"qid": "q2", "em": 0}])
    b = _write(tmp_path / "b", "samples.jsonl", [{"qid": "q1", "em": 0}, {"qid": "q2", "em": 0}])
    t, why = paired_for(a, {"em": 0.5}, b, {"em": 0.0}, "em", "rel")
    assert t is None and "baseline of 0 is undefined" in why


def test_no_recorded_value_no_interval(tmp_path):
    d = _write(tmp_path / "r", "samples.jsonl", [{"qid": "a", "em": 1}, {"qid": "b", "em": 0}])
    assert units_for(d, {}, "em") is None
    assert units_for(d, {"em": float("nan")}, "em") is None
