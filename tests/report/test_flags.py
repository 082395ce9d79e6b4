"""Flags on hand-made rows: the rules of conf/report/flags.yaml read the diagnostic columns
of ragrepro.generation.summarize and name what crossed its threshold."""
from __future__ import annotations

from pathlib import Path

import pytest

from ragrepro.errors import ConfigError
from ragrepro.paths import REPO_ROOT
from ragrepro.report import flags as fl

RULES = fl.parse_rules({"flags": [
    {"name": "length", "columns": "gen_*_length", "at_least": 0.10},
    {"name": "empty", "columns": "gen_*_empty", "at_least": 0.20},
    {"name": "ctx_empty", "columns": "diag_ctx_empty", "at_least": 0.20}]})


def test_a_row_at_the_threshold_is_flagged_below_it_is_not() -> None:
    # 1 of 10 outputs hit the budget: exactly 10%, flagged; 0.099 is not
    assert fl.flags_text({"gen_answer_length": 0.1}, RULES) == "length 10%"
    assert fl.flags_text({"gen_answer_length": 0.099}, RULES) == ""
    assert fl.flags_text({"gen_answer_length": 1.0, "gen_answer_empty": 0.35}, RULES) == \
        "length 100%; empty 35%"


def test_csv_strings_are_read_as_numbers_and_other_columns_ignored() -> None:
    row = {"gen_answer_length": "0.5", "gen_answer_eos": "0.5", "f1_squad": "0.9",
           "diag_ctx_empty": "0.25", "gen_answer_output_tokens": "37.5"}
    assert fl.flags_text(row, RULES) == "length 50%; ctx_empty 25%"


def test_a_rule_hit_by_two_stages_names_each_stage() -> None:
    row = {"gen_filter_length": 1.0, "gen_answer_length": 0.125, "gen_answer_empty": 0.0}
    assert fl.flags_text(row, RULES) == "length 12% (answer); length 100% (filter)"
    assert [f.stage for f in fl.row_flags(row, RULES)] == ["answer", "filter"]


def test_rows_without_diagnostics_get_no_column_rows_with_them_an_empty_cell() -> None:
    old = {"ppl_word": 36.1, "rerank": "bm25"}
    clean = {"gen_answer_length": 0.0, "gen_answer_empty": 0.05}
    assert not fl.has_diagnostics(old, RULES)
    assert fl.flags_column([old, {"gen_answer_length": None}], RULES) is None
    assert fl.flags_column([old, clean], RULES) == ["", ""]
    assert fl.flags_column([clean, {"gen_x_empty": 0.2}], RULES) == ["", "empty 20%"]


def test_the_pattern_matches_whole_column_names_only() -> None:
    rule = RULES[0]
    assert rule.match("gen_answer_length") == "answer"
    assert rule.match("gen_answer_length_extra") is None
    assert rule.match("xgen_answer_length") is None
    assert RULES[2].match("diag_ctx_empty") == ""


def test_merged_row_fills_missing_numbers_from_later_sources() -> None:
    assert fl.merged_row({"a": "", "b": "0.5"}, {"a": 0.3, "b": 0.9, "c": 1}) == \
        {"a": 0.3, "b": "0.5", "c": 1}


def test_the_shipped_yaml_has_the_issue_thresholds() -> None:
    rules = {r.name: r for r in fl.load_rules()}
    assert rules["length"].at_least == pytest.approx(0.10)
    assert rules["empty"].at_least == pytest.approx(0.20)
    assert rules["ctx_empty"].at_least == pytest.approx(0.20)
    assert rules["truncated"].at_least == pytest.approx(0.10)
    assert all(r.means for r in rules.values())
    assert fl.flags_text({"gen_answer_truncated": 0.5, "diag_ctx_empty": 0.19}) == \
        "truncated 50%"


@pytest.mark.parametrize("bad, message", [
    ({"rules": []}, "top-level `flags:`"),
    ({"flags": [{"name": "x", "columns": "a"}]}, r"lacks \['at_least'\]"),
    ({"flags": [{"name": "x", "columns": "a", "at_least": 0.1, "below": 1}]},
     r"unknown key\(s\) \['below'\]"),
    ({"flags": [{"name": "x", "columns": "a", "at_least": 10}]}, "share in"),
])
def test_bad_rules_are_refused_naming_the_key(bad: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        fl.parse_rules(bad)


def test_a_missing_rules_file_says_where(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="flags.yaml not found"):
        fl.load_rules(tmp_path / "flags.yaml")


def test_docs_explain_every_flag_with_the_yaml_threshold() -> None:
    doc = (REPO_ROOT / "docs" / "report.md").read_text(encoding="utf-8")
    for rule in fl.load_rules():
        row = f"| `{rule.name}` | `{rule.columns}` | >= {100 * rule.at_least:.0f}% |"
        assert row in doc, f"docs/report.md lacks the flags-table row {row!r}"


def test_a_line_of_several_runs_names_each_flagged_run() -> None:
    line = {"Full": {"gen_answer_length": "0.0"},
            "FilCo": {"gen_answer_length": "0.0", "diag_ctx_empty": "0.35"},
            "Silver": {"f1": "0.6"}}
    assert fl.group_flags(line, RULES) == "FilCo: ctx_empty 35%"
    assert fl.group_flags({"Full": {"gen_answer_length": 0.0}}, RULES) == ""
    assert fl.group_flags({"Full": {"f1": 0.5}}, RULES) is None
