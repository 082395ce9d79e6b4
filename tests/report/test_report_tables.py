"""Paper tables from runs: hand-computed differences and gains, 'not run' rows, rows
without a paper cell, FilCo's Fig. 4 deltas, and the declarative key rules."""
from __future__ import annotations

from pathlib import Path

import pytest

from ragrepro.report.paper import paper_table, papers
from ragrepro.report.results_tables import main
from ragrepro.report.runs import load_runs
from ragrepro.report.spec import derive_key, load_metric_infos, load_table_specs
from ragrepro.report.tables import build_all, build_table
from tests.report.demo import filco, make_run, ralm


def _spec(name: str) -> dict:
    return next(s for s in load_table_specs() if s["name"] == name)


def _rows(root: Path, name: str):
    spec = _spec(name)
    return build_table(spec, paper_table(spec["paper"], spec["table"]), load_runs(root),
                       load_metric_infos())


def _row(rows, cell):
    hits = [r for r in rows if r.cell == cell]
    assert len(hits) == 1, [r.cell for r in rows][:10]
    return hits[0]


def test_ralm_table1_differences_and_gains(results):
    rows = _rows(results, "ralm/table1")
    rerank = _row(rows, "GPT-2 S, BM25, zero-shot · WT-103")
    assert rerank.status == "ok" and rerank.run_id == "r1rerank"
    assert rerank.ours == 28.0 and rerank.paper == 28.6
    assert rerank.diff == pytest.approx(-0.6)
    assert rerank.ours_gain == pytest.approx((28.0 - 40.0) / 40.0)        # -30 %
    assert rerank.paper_gain == pytest.approx((28.6 - 37.5) / 37.5)       # -23.7 %
    bm25 = _row(rows, "GPT-2 S, BM25, - · WT-103")
    assert bm25.ours_gain == pytest.approx(-0.25)
    assert bm25.paper_gain == pytest.approx((29.6 - 37.5) / 37.5)
    base = _row(rows, "GPT-2 S, -, - · WT-103")
    assert base.ours == 40.0 and base.diff == pytest.approx(2.5) and base.ours_gain is None
    # The comparability note names every substitution.
    for part in ("mini scale", "model smollm2-135m stands in for gpt2-small",
                 "dataset wiki-vital stands in for wikitext-103", "first 50 examples only"):
        assert part in rerank.note
    assert rerank.metric == "ppl_word" and rerank.settings["stride"] == 4


def test_cells_without_runs_say_not_run(results):
    rows = _rows(results, "ralm/table1")
    assert len(rows) == 80  # 16 paper rows x 5 datasets, nothing dropped
    not_run = [r for r in rows if r.status == "not run"]
    assert len(not_run) == 77
    xl = _row(rows, "GPT-2 XL, BM25, zero-shot · FreeLaw")
    assert xl.status == "not run" and xl.ours is None and xl.paper == 6.0
    assert xl.paper_gain == pytest.approx((6.0 - 8.0) / 8.0)


def test_filco_table5_percent_scale_and_gain_over_full(results):
    rows = _rows(results, "filco/table5")
    r = _row(rows, "FilCo, top-5 · NQ")
    assert r.ours == pytest.approx(52.0) and r.paper == 61.8
    assert r.diff == pytest.approx(-9.8)
    assert r.ours_gain == pytest.approx(0.3)
    assert r.paper_gain == pytest.approx((61.8 - 47.6) / 47.6)
    assert r.metric == "em_filco_code"
    assert "dataset vital-qa stands in for nq" in r.note


def test_filco_fig4_delta_and_incomplete_average(results):
    rows = _rows(results, "filco/fig4_delta")
    r = _row(rows, "Flan-T5 · NQ")
    assert r.ours == pytest.approx(5.0)          # (0.35 - 0.30) * 100
    assert r.diff == pytest.approx(5.0 - 4.3)
    avg = [x for x in rows if x.cell == "Flan-T5 · Average"]
    assert len(avg) == 1 and avg[0].status == "incomplete" and "1 of 6" in avg[0].note
    # the Full run is consumed as the partner, never shown as an unmatched run
    assert not [x for x in rows if x.run_id == "f4full"]


def test_fig4_average_when_all_six_datasets_ran(tmp_path):
    root = tmp_path / "results"
    datasets = {"nq": 0.01, "triviaqa": 0.02, "hotpotqa": 0.03, "eli5": 0.04, "fever": 0.06,
                "wow": 0.07}
    for ds, d in datasets.items():
        metric = {"nq": "em_filco_code", "triviaqa": "em_filco_code", "fever": "accuracy"}.get(
            ds, "f1_char_filco_code")
        make_run(root, "filco/fig4", f"full{ds}", filco("full", 1, ds), {metric: 0.5})
        make_run(root, "filco/fig4", f"filco{ds}", filco("filco", 1, ds), {metric: 0.5 + d})
    rows = _rows(root, "filco/fig4_delta")
    avg = _row([r for r in rows if r.status == "ok"], "Flan-T5 · Average")
    assert avg.ours == pytest.approx(100 * sum(datasets.values()) / 6)
    assert avg.diff == pytest.approx(avg.ours - 2.8)


def test_unmatched_run_is_kept_and_metric_fallback_is_noted(tmp_path):
    root = tmp_path / "results"
    make_run(root, "ralm/table1", "oracle", ralm("smollm2-135m", "bm25", "oracle"),
             {"ppl_word": 25.0})
    make_run(root, "ralm/table1", "nometric", ralm("smollm2-135m", None, "none"),
             {"n_tokens": 10})
    make_run(root, "filco/table5", "squadonly", filco("filco", 5), {"em_squad": 0.5})
    rows = _rows(root, "ralm/table1")
    extra = [r for r in rows if r.run_id == "oracle"]
    assert len(extra) == 1 and extra[0].status == "no paper number"
    assert extra[0].ours == 25.0 and extra[0].keys["rerank"] == "oracle"
    missing = next(r for r in rows if r.run_id == "nometric")
    assert missing.status == "missing metric" and missing.ours is None
    r = _row(_rows(root, "filco/table5"), "FilCo, top-5 · NQ")
    assert r.ours == pytest.approx(50.0) and r.metric == "em_squad"
    assert "metric em_squad (paper em_filco_code)" in r.note


def test_setting_differences_enter_the_note(tmp_path):
    root = tmp_path / "results"
    make_run(root, "ralm/table1", "s8", ralm("gpt2-small", "bm25", "first", stride=8,
                                             dataset="wikitext-103", scale="paper", limit=None),
             {"ppl_word": 29.9})
    r = next(x for x in _rows(root, "ralm/table1") if x.run_id == "s8")
    assert r.cell == "GPT-2 S, BM25, - · WT-103"
    assert r.note == "stride 8 (paper 4); no paired baseline run for the gain"


def test_key_rules():
    row = {"model": "gemma3-270m", "scorer_model": "gemma3-270m", "num_docs": 0,
           "retriever": "bm25"}
    assert derive_key({"cases": [{"when": {"scorer_model": "$model"}, "value": "self"}]},
                      row) == ("self", None)
    assert derive_key({"cases": [{"when": {"num_docs": 0}, "value": "none"}],
                       "column": "retriever"}, row) == ("none", None)
    assert derive_key({"column": ["missing", "retriever"], "map": {"bm25": "BM"}}, row) == \
        ("BM", None)
    assert derive_key({"column": "model", "stand_in": {"gemma3-270m": "gpt2-small"}}, row) == \
        ("gpt2-small", ("gemma3-270m", "gpt2-small"))
    assert derive_key({"column": "nope", "default": "none"}, row) == ("none", None)
    assert derive_key({"cases": [{"when": {"nope": "null"}, "value": "x"}]}, row) == ("x", None)


def test_files_and_cli(results, capsys):
    built = build_all(results, names=["ralm/table1"])
    assert [b.name for b in built] == ["ralm/table1"]
    md = (results / "report/ralm/table1.md").read_text()
    assert ("| GPT-2 S, BM25, zero-shot · WT-103 | 28.00 [no CI] |  | 28.6 | -0.60 | "
            "not comparable: scale=mini vs paper (+5 more) | -30.0% [no CI] | -23.7% |") in md
    assert "| GPT-2 M, -, - · WT-103 | not run |  | 26.3 |" in md
    html = (results / "report/ralm/table1.html").read_text()
    assert "<td>28.00 [no CI]</td><td></td><td>28.6</td><td>-0.60</td>" in html
    main(["filco/fig4", "--results", str(results)])  # an experiment name works too
    assert "FilCo, Fig. 4" in capsys.readouterr().out


def test_every_spec_loads_and_names_a_paper_table():
    specs = load_table_specs()
    names = {s["name"] for s in specs}
    for paper, info in papers().items():
        for table in info["tables"]:
            assert f"{paper}/{table}" in names, f"no report spec for {paper}/{table}"
    assert {"riches/main_f1", "riches/main_autoais"} <= names
