"""Real FilCo runs (tiny random T5, two vital-qa questions, one training step) through the
runner: each row names its real dataset, variant, split and setting, writes the metric
columns the report's paper tables key on, and the report's FilCo tables fill from them
(no made-up rows)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from ragrepro.data.loaders import VITAL_QA_VERSION
from ragrepro.paths import CONF_DIR
from ragrepro.report.paper import paper_table
from ragrepro.report.runs import load_runs
from ragrepro.report.spec import load_metric_infos, load_table_specs
from ragrepro.report.tables import build_table
from ragrepro.runner import execute
from ragrepro.tracking import read_csv

# the module's fixture trains and runs 9 tiny cells (about 13 s): built once, on one worker
pytestmark = pytest.mark.one_worker

# Small budgets keep the random T5 (it never stops) fast; the targets are cut to them in
# training too, so the budget check (a budget must hold every target as trained) passes.
TINY = ["model=tiny-t5-random", "limit=2", "train_dataset.limit=4",
        "filco.train.common.max_steps=1", "filco.gen_max_new_tokens=4",
        "filco.train.gen.max_target_tokens=4", "filco.ctx_max_new_tokens=8",
        "+filco.train.ctx.max_target_tokens=8", "wandb.mode=disabled", "device=cpu"]


def _run(root: Path, experiment: str, *overrides: str) -> None:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}",
                                                       f"results_dir={root}", *overrides])
    execute(cfg)


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("filco-real")
    for setting in ("full", "psg", "filco", "silver"):
        _run(root, "filco/table5", f"filco/variant={setting}", *TINY)
    for setting in ("full", "filco"):
        _run(root, "filco/fig4", f"filco/variant={setting}", *TINY)
    for setting in ("full", "silver"):
        _run(root, "filco/table3", f"filco/variant={setting}", *TINY)
    _run(root, "filco/table2", "filco.k=1", "limit=6", "wandb.mode=disabled")
    return root


def _table(root: Path, name: str):
    spec = next(s for s in load_table_specs() if s["name"] == name)
    return build_table(spec, paper_table(spec["paper"], spec["table"]), load_runs(root),
                       load_metric_infos())


def _cell(rows, cell):
    hits = [r for r in rows if r.cell == cell and r.run_id]
    assert len(hits) == 1, sorted({r.cell for r in rows})[:12]
    return hits[0]


def test_rows_name_dataset_variant_split_and_setting(results):
    rows = read_csv(results / "filco" / "table5.csv")
    assert sorted(r["setting"] for r in rows) == ["filco", "full", "psg", "silver"]
    # the baselines are distinguishable by method, not all "filco"
    assert sorted(r["method"] for r in rows) == ["filco", "filco-full", "filco-psg",
                                                  "filco-silver"]
    for r in rows:
        # not the root defaults (dataset=wiki-vital, heldout-leads)
        assert (r["dataset"], r["dataset_variant"], r["split"]) == ("vital-qa",
                                                                    VITAL_QA_VERSION, "test")
        assert r["limit"] == "2" and r["top_k"] == "5"
        for col in ("em_squad", "em_filco_code", "unigram_precision"):
            assert 0.0 <= float(r[col]) <= 1.0, col
        assert float(r["em_filco_code"]) * 100 == pytest.approx(float(r["score_code"]))


def test_report_table5_fills_from_real_rows(results):
    rows = _table(results, "filco/table5")
    csv_rows = {r["setting"]: r for r in read_csv(results / "filco" / "table5.csv")}
    for label, setting in (("Full, top-5", "full"), ("Psgs, top-5", "psg"),
                           ("FilCo, top-5", "filco"), ("Silver, top-5", "silver")):
        row = _cell(rows, f"{label} · NQ")
        assert row.status == "ok", (label, row.status)
        assert row.metric == "em_filco_code"  # the paper's own metric: like for like
        assert row.ours == pytest.approx(100 * float(csv_rows[setting]["em_filco_code"]))
        assert row.run_id == csv_rows[setting]["run_id"]
        assert "dataset vital-qa stands in for nq" in row.note
        assert "model tiny-t5-random stands in for flan-t5-xl" in row.note
        assert "first 2 examples only" in row.note


def test_report_table3_fills_unigram_precision_from_context_runs(results):
    rows = _table(results, "filco/table3")
    by = {r["setting"]: r for r in read_csv(results / "filco" / "table3.csv")}
    assert {r["stage"] for r in by.values()} == {"context"}
    for label, setting in (("Full", "full"), ("Silver", "silver")):
        row = _cell(rows, f"{label} · NQ")
        assert row.status == "ok" and row.metric == "unigram_precision"
        assert row.ours == pytest.approx(float(by[setting]["context_precision"]))


def test_report_fig4_delta_pairs_real_full_and_filco_rows(results):
    rows = _table(results, "filco/fig4_delta")
    row = _cell(rows, "Flan-T5 · NQ")
    by = {r["setting"]: r for r in read_csv(results / "filco" / "fig4.csv")}
    expected = 100 * (float(by["filco"]["em_filco_code"]) - float(by["full"]["em_filco_code"]))
    assert row.status == "ok" and row.ours == pytest.approx(expected)


def test_report_table2_fills_recall_and_precision(results):
    (r,) = read_csv(results / "filco" / "table2.csv")
    assert (r["dataset"], r["split"], r["top_k"], r["recall_at_k_kind"]) == (
        "vital-qa", "test", "1", "answer")
    rows = _table(results, "filco/table2")
    recall = _cell(rows, "Recall · NQ top-1")
    assert recall.status == "ok" and recall.metric == "recall_at_k"
    assert recall.ours == pytest.approx(100 * float(r["recall_at_k"]))
    assert recall.ours == pytest.approx(float(r["recall_answer"]))
    precision = _cell(rows, "Precision · NQ top-1")
    assert precision.metric == "unigram_precision"
    assert precision.ours == pytest.approx(float(r["precision"]))


def test_local_qa_file_row_names_local_qa(tmp_path):
    # issue 14: a filco/table2 run on a local QA file said dataset=wiki-vital
    data = tmp_path / "qa.jsonl"
    data.write_text(json.dumps({"qid": "a", "question": "What is the capital of Laos?",
                                "answers": ["Vientiane"]}) + "\n")
    _run(tmp_path / "res", "filco/table2", "dataset=local_qa",
         f"dataset.path={data}", "filco.k=1", "wandb.mode=disabled")
    (r,) = read_csv(tmp_path / "res" / "filco" / "table2.csv")
    assert (r["dataset"], r["split"], r["dataset_path"]) == ("local_qa", "all", str(data))
    assert r["dataset_variant"] == ""
