"""The Table 1 builder: newest run per cell, gains over no retrieval, the headline answer."""
import json
import os

import pytest

from ralm import table1


def write_run(root, run_id, model, rerank, ppl, mtime):
    d = root / "ralm" / "table1" / run_id
    d.mkdir(parents=True)
    p = d / "metrics.json"
    p.write_text(json.dumps({"run_id": run_id, "metrics": {"ppl_word": ppl, "ppl_token": ppl / 3,
                                                           "n_words": 100, "n_tokens": 150},
                             "settings": {"model": model, "rerank": rerank, "stride": 16,
                                          "retriever": None if rerank == "none" else "bm25"}}))
    os.utime(p, (mtime, mtime))


def test_table_gains_and_headline(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 30.0, 2)
    write_run(tmp_path, "b2", "smollm2-135m", "first", 32.0, 3)  # newer run of the same cell
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    write_run(tmp_path, "d", "gemma3-270m", "first", 25.0, 1)
    csv_path, md_path = table1.build("ralm/table1", tmp_path)
    rows = {(r["model"], r["rerank"]): r for r in table1.rows_of(
        table1.pick_cells(table1.finished_runs(tmp_path, "ralm/table1")))}
    assert rows[("smollm2-135m", "first")]["ppl_word"] == 32.0
    assert rows[("smollm2-135m", "first")]["gain_vs_no_retrieval_pct"] == pytest.approx(20.0)
    assert rows[("gemma3-270m", "none")]["gain_vs_no_retrieval_pct"] is None
    md = md_path.read_text()
    assert "**Does the smaller model with retrieval reach the larger model without it? No**" in md
    assert "| GPT-2 S (110M) | 37.5 | 29.6 (21.1%)" in md
    assert csv_path.name == "table1_summary.csv" and "gain_vs_no_retrieval_pct" in csv_path.read_text()


def test_headline_yes_when_small_plus_retrieval_beats_large(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "zeroshot", 30.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    cells = table1.pick_cells(table1.finished_runs(tmp_path, "ralm/table1"))
    text = table1.headline(cells)
    assert "? Yes**" in text and "30.00 -> reaches" in text


def test_headline_refuses_when_the_smaller_model_is_already_better(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 30.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 29.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    text = table1.headline(table1.pick_cells(table1.finished_runs(tmp_path, "ralm/table1")))
    assert "Not a meaningful question here" in text and "30.00" in text


def test_upper_bounds_are_shown_but_never_answer_the_headline(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 41.0, 1)
    write_run(tmp_path, "o", "smollm2-135m", "oracle", 30.0, 1)
    write_run(tmp_path, "g", "smollm2-135m", "gold", 20.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    cells = table1.pick_cells(table1.finished_runs(tmp_path, "ralm/table1"))
    text = table1.headline(cells)
    assert "? No**" in text and "30.00" not in text and "20.00" not in text
    rows = [(r["rerank"], r["retrieval"], r["gain_vs_no_retrieval_pct"])
            for r in table1.rows_of(cells) if r["model"] == "smollm2-135m"]
    # gains: (40 - 30) / 40 = 25%, (40 - 20) / 40 = 50%; gold has no retriever
    assert rows == [("none", "-", None), ("first", "bm25", -2.5), ("oracle", "bm25", 25.0),
                    ("gold", "own article", 50.0)]
