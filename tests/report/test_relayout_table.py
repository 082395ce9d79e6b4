"""scripts/relayout_table.py re-lays out a committed `runs`-layout table to its spec's current
columns from the table's own cells: on fixture runs, relaying out the old wide rendering (the
specs before the readable-tables change) gives exactly what the renderer writes from the runs
with the current spec, note included; the committed tables it was run on are in that layout."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from ragrepro.errors import DataError
from ragrepro.paths import REPO_ROOT
from ragrepro.report import run_rows
from ragrepro.report.readable import markdown_headers
from ragrepro.report.result_specs import load_result_spec
from scripts import relayout_table
from tests.report import table_fixtures as fx

# The note sentence the readable layout added to riches/conf/report/tables/riches/_defaults.yaml.
CSV_SENTENCE = (" EM, the soft AutoAIS score and the seconds per question are in the CSV "
                "beside this table.")
# The RICHES columns before the readable layout (the committed specs until then).
OLD_METRICS = ["f1_squad", "em_squad", "autoais", "autoais_substitute", "autoais_mean_score",
               "autoais_substitute_mean_score", "keys_per_answer", "verbatim_rate",
               "gold_title_recall", "seconds_per_question", "n"]
OLD_CONTEXT = ["model", "dataset", "limit", "key_type", "beam_size", "adaptive", "thoughts",
               "autoais_scorer", "autoais_judge_accuracy", "keys_articles", "keys_n_articles"]


def _old(spec: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """The spec as it was: the old note, no note_columns / csv_also / one_of unless given."""
    assert CSV_SENTENCE in spec["note"]
    old = {k: v for k, v in spec.items() if k not in ("note_columns", "csv_also", "one_of")}
    return {**old, "note": spec["note"].replace(CSV_SENTENCE, ""), **fields}


def _add_columns(path: Path, extra) -> None:
    """Give every row of a fixture CSV the columns extra(row) returns."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = [{**r, **extra(r)} for r in csv.DictReader(f)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The RICHES fixture runs with the columns the committed tables have: the judge, its
    accuracy, the keys (a sample for one key type / for RICHES rows only), n by hops, the
    share answered and a generation diagnostic that raises a flag."""
    r = tmp_path_factory.mktemp("results")
    fx.riches_runs(r)
    judge = {"autoais_scorer": "llm-judge:j", "autoais_judge_accuracy": "94.2% [90.0, 97.5]"}
    _add_columns(r / "riches" / "keys.csv", lambda row: {  # a judge predating its accuracy
        "autoais_scorer": "llm-judge:j", "autoais_substitute": "0.5", "seconds_per_question": "4.25",
        "keys_per_answer": "1", "adaptive": "True",
        "keys_articles": "sample" if row["key_type"] == "proposition" else "all",
        "keys_n_articles": "109" if row["key_type"] == "proposition" else "9828"})
    _add_columns(r / "riches" / "main.csv", lambda row: {
        **judge, "dtype": "bfloat16", "n": "5" if row["dataset_hops"] == "1" else "4",
        "answered": "0.8" if row["riches_method"] == "riches" else "1",
        "autoais_substitute": "0.25", "gold_title_recall": "0.5", "keys_per_answer": "1.5",
        "key_type": "sentence" if row["riches_method"] in ("riches", "no_retrieval") else "",
        "gen_answer_length": "0.4" if row["riches_method"] == "riches" else "0"})
    return r


def _rendered(spec: dict[str, Any], root: Path, wide: bool = False) -> str:
    """The renderer's Markdown from the fixture runs; `wide`: as before the ten-column check
    (the old specs' tables)."""
    check = run_rows.check_columns
    if wide:
        run_rows.check_columns = lambda *_a, **_k: None
    try:
        md, _csv = run_rows.write(spec, root)
    finally:
        run_rows.check_columns = check
    return md.read_text("utf-8")


def test_keys_relaid_out_from_its_old_rendering_is_the_new_rendering(root: Path) -> None:
    """As the committed keys table: built before the judge-accuracy column, so the row
    hook's label of an llm-judge row without one comes into the note from the judge's cells."""
    new_spec = load_result_spec("riches/keys")
    context = [c for c in OLD_CONTEXT if c != "autoais_judge_accuracy"]
    old = _rendered(_old(new_spec, metrics=OLD_METRICS, context=context), root, wide=True)
    assert len(markdown_headers(old)[0]) == 15 and "Settings not shown" not in old
    new = _rendered(new_spec, root)
    assert markdown_headers(new)[0] == ["key_type", "f1_squad", "autoais_substitute",
                                        "keys_per_answer", "keys_articles", "keys_n_articles"]
    assert "n = 3; model = m; dataset = d; limit = 3; beam_size = 10; adaptive = True; " \
           "autoais_scorer = llm-judge:j; autoais_judge_accuracy = not recorded (an older " \
           "row)." in new
    assert relayout_table.relayout(old, new_spec) == new
    assert relayout_table.relayout(new, new_spec) == new  # a fixed point


def test_ladder_relaid_out_from_its_old_rendering_is_the_new_rendering(root: Path) -> None:
    """The ladder's spec over the main fixture runs: n leaves the columns for the note
    (varying by row), dtype was only in the old note (its statement is kept), keys per
    answer leaves the table, the paired test and the flags stay."""
    new_spec = {**load_result_spec("riches/main_ladder"), "name": "riches/main"}
    old_spec = _old(new_spec, metrics=["f1_squad", "answered", "autoais_substitute",
                                       "keys_per_answer", "gold_title_recall", "n"],
                    ci_metrics=["f1_squad", "autoais_substitute", "keys_per_answer",
                                "gold_title_recall"], context=[],
                    note_columns=["model", "dtype", "key_type", "autoais_scorer",
                                  "autoais_judge_accuracy"])
    old = _rendered(old_spec, root, wide=True)
    assert len(markdown_headers(old)[0]) == 12 and "dtype = bfloat16" in old
    new = _rendered(new_spec, root)
    assert len(markdown_headers(new)[0]) == 10
    assert "n varies by row (4, 5); model = m; dtype = bfloat16; key_type = sentence " \
           "(4 of 8 rows; the others have none)" in new
    text_after = "\nMeasured on the fixture runs; the text after a table stays.\n"
    assert relayout_table.relayout(old + text_after, new_spec) == new + text_after
    assert relayout_table.relayout(new, new_spec) == new


def test_a_column_the_old_table_lacks_is_refused(root: Path) -> None:
    spec = load_result_spec("riches/keys")
    old = _rendered(_old(spec, metrics=OLD_METRICS, context=["model"]), root, wide=True)
    with pytest.raises(DataError, match=r"keys_articles.*rebuild it from its runs"):
        relayout_table.relayout(old, spec)
    with pytest.raises(DataError, match="not the spec's `by`"):
        relayout_table.relayout(old, {**spec, "by": ["beam_size"]})


@pytest.mark.parametrize("rel, name", [("results/riches/keys_table.md", "riches/keys"),
                                       ("results/riches/main_ladder_table.md",
                                        "riches/main_ladder")])
def test_the_committed_tables_are_in_their_specs_layout(rel: str, name: str) -> None:
    assert relayout_table.main([str(REPO_ROOT / rel), name, "--check"]) == 0
