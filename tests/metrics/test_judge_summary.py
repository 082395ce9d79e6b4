"""The README's judge summary, from rows shaped like results/judge/judge_eval.csv."""
from __future__ import annotations

from scripts.judge_summary import render


def _row(judge, threshold, acc, lo, hi, auc="0.75"):
    return {"judge": judge, "dtype": "float32", "threshold": threshold, "n": "120",
            "accuracy": acc, "accuracy_ci_low": lo, "accuracy_ci_high": hi, "roc_auc": auc}


def test_one_line_per_judge_with_both_thresholds():
    text = render([_row("llm-judge:a", "0.5", "0.5", "0.4", "0.6"),
                   _row("llm-judge:a", "5-fold CV", "0.942", "0.9", "0.975"),
                   _row("always-yes", "-", "0.5", "0.408", "0.592", auc="0.5")])
    lines = text.splitlines()
    assert lines[2] == "| llm-judge:a | float32 | 50.0 [40.0, 60.0] | 94.2 [90.0, 97.5] | 0.75 | 120 |"
    assert lines[3] == "| always-yes | float32 | 50.0 [40.8, 59.2] | - | 0.50 | 120 |"
