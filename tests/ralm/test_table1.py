"""The Table 1 builder (the `ralm.table1` layout with ralm/conf/report/tables/ralm/table1.yaml):
one row per setting, CIs on every perplexity and gain, the headline."""
import json
import math
import os

import pytest

from ragrepro.errors import DataError
from ragrepro.report import results_tables
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.samples import StatsSettings
from ralm import gain_render, gain_rows

ST = StatsSettings(resamples=500, seed=0, block_tokens=32)
SPEC = load_result_spec("ralm/table1")


EXP = "ralm/table1"


def runs_of(root):
    return gain_rows.finished_runs(root, EXP)


def rows_of(runs, st=ST):
    return gain_rows.rows_of(runs, SPEC, st)


def markdown(rows, st=ST):
    return gain_render.to_markdown(rows, SPEC, EXP, st)


def headline_of(root):
    return gain_render.headline(gain_render.cells_of(rows_of(runs_of(root)), SPEC), SPEC)


def write_run(root, run_id, model, rerank, ppl, mtime, stride=16, nlls=None, config=None):
    """A finished run whose 8 windows of 16 scored tokens reproduce `ppl` (100 words,
    128 scored tokens), or carry the given per-window NLLs."""
    d = root / "ralm" / "table1" / run_id
    d.mkdir(parents=True)
    nlls = nlls or [100 * math.log(ppl) / 8] * 8
    total = sum(nlls)
    (d / "samples.jsonl").write_text("".join(json.dumps(
        {"text": 0, "window": i, "nll_sum": x, "n_scored": 16}) + "\n" for i, x in enumerate(nlls)))
    p = d / "metrics.json"
    p.write_text(json.dumps({"run_id": run_id, "metrics": {
        "ppl_word": math.exp(total / 100), "ppl_token": math.exp(total / 128),
        "n_words": 100, "n_tokens": 128},
        "settings": {"model": model, "rerank": rerank, "stride": stride,
                     "retriever": None if rerank == "none" else "bm25"}}))
    (d / "config.json").write_text(json.dumps(config or {"ralm": {"stride": stride}}))
    os.utime(p, (mtime, mtime))


def rows(tmp_path):
    return rows_of(runs_of(tmp_path))


def test_table_gains_and_headline(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 32.0, 2)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    write_run(tmp_path, "d", "gemma3-270m", "first", 25.0, 1)
    csv_path, md_path = results_tables.build(EXP, tmp_path, st=ST)
    by = {(r["model"], r["rerank"]): r for r in rows(tmp_path)}
    assert by[("smollm2-135m", "first")]["ppl_word"] == pytest.approx(32.0)
    assert by[("smollm2-135m", "first")]["gain_vs_no_retrieval_pct"] == pytest.approx(20.0)
    assert by[("smollm2-135m", "first")]["baseline_run_id"] == "a"
    assert by[("gemma3-270m", "none")]["gain_vs_no_retrieval_pct"] is None
    md = md_path.read_text()
    assert "**Does the smaller model with retrieval reach the larger model without it? No**" in md
    assert "| GPT-2 S (110M) | 37.5 | 29.6 (21.1%)" in md
    text = csv_path.read_text()
    assert csv_path.name == "table1_summary.csv" and "gain_vs_no_retrieval_pct" in text
    assert "stats_resamples" in text and "ppl_word_ci_low" in text


def test_uniform_gain_on_every_block_is_distinguishable_with_a_tight_ci(tmp_path):
    # every window's NLL drops by the same factor: every resample gives the same gain
    write_run(tmp_path, "a", "smollm2-135m", "none", 0, 1, nlls=[30, 50, 20, 40, 35, 45, 25, 55])
    write_run(tmp_path, "b", "smollm2-135m", "first", 0, 2,
              nlls=[x * 0.9 for x in [30, 50, 20, 40, 35, 45, 25, 55]])
    # one block per window (8 blocks): the exact permutation p can reach 2 / 2**8
    st = StatsSettings(resamples=500, seed=0, block_tokens=16)
    runs = runs_of(tmp_path)
    r = {x["rerank"]: x for x in rows_of(runs, st)}["first"]
    gain = 100 * (1 - math.exp(-0.1 * 300 / 100))
    assert r["gain_vs_no_retrieval_pct"] == pytest.approx(gain, abs=0.05)
    assert r["gain_ci_low"] > 0 and r["gain_includes_zero"] is False
    assert r["n_blocks"] == 8 and r["ppl_word_ci_low"] < r["ppl_word"] < r["ppl_word_ci_high"]
    assert r["gain_p"] == pytest.approx(2 / 256, abs=1e-4)
    md = markdown(rows_of(runs, st), st)
    assert "Gains distinguishable from zero (95% CI excludes 0): 1 of 1" in md
    assert "**yes**" in md and "500 resamples, seed 0" in md


def test_mixed_gain_includes_zero_and_is_marked(tmp_path):
    base = [30, 50, 20, 40, 35, 45, 25, 55]
    write_run(tmp_path, "a", "smollm2-135m", "none", 0, 1, nlls=base)
    # better on half the blocks, worse on the other half
    write_run(tmp_path, "b", "smollm2-135m", "first", 0, 2,
              nlls=[x + (-3 if i % 4 < 2 else 3) for i, x in enumerate(base)])
    r = {x["rerank"]: x for x in rows(tmp_path)}["first"]
    assert r["gain_includes_zero"] is True and r["gain_ci_low"] < 0 < r["gain_ci_high"]
    md = markdown(rows(tmp_path))
    assert "no (CI includes 0)" in md and "0 of 1" in md


def test_runs_differing_in_a_setting_are_separate_rows_with_their_own_baseline(tmp_path):
    write_run(tmp_path, "a16", "smollm2-135m", "none", 40.0, 1, stride=16)
    write_run(tmp_path, "b16", "smollm2-135m", "first", 30.0, 2, stride=16)
    write_run(tmp_path, "a32", "smollm2-135m", "none", 50.0, 1, stride=32)
    write_run(tmp_path, "b32", "smollm2-135m", "first", 45.0, 3, stride=32)
    out = rows(tmp_path)
    assert len(out) == 4
    by = {r["run_id"]: r for r in out}
    assert by["b16"]["baseline_run_id"] == "a16" and by["b32"]["baseline_run_id"] == "a32"
    assert by["b32"]["gain_vs_no_retrieval_pct"] == pytest.approx(10.0)
    md = markdown(out)
    assert "differ in: stride (shown as columns)" in md
    assert "| Model | Retrieval | Reranking | stride |" in md
    assert "Headline" in md and "Not computed" in md


def test_runs_with_identical_settings_are_refused_naming_the_config_difference(tmp_path):
    write_run(tmp_path, "b", "smollm2-135m", "first", 30.0, 2, config={"ralm": {"k": 4}})
    write_run(tmp_path, "b2", "smollm2-135m", "first", 32.0, 3, config={"ralm": {"k": 8}})
    with pytest.raises(DataError, match=r"b, b2 record the same settings.*ralm\.k \(4 vs 8\)"):
        rows(tmp_path)


def test_headline_yes_when_small_plus_retrieval_beats_large(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "zeroshot", 30.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    text = headline_of(tmp_path)
    assert "? Yes**" in text and "30.00 -> reaches" in text


def test_headline_refuses_when_the_smaller_model_is_already_better(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 30.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 29.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    text = headline_of(tmp_path)
    assert "Not a meaningful question here" in text and "30.00" in text


def test_the_code_version_of_the_rows_is_stated(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 32.0, 2)
    for run_id, code in (("a", "abc123"), ("b", "def456+dirty")):
        p = tmp_path / "ralm" / "table1" / run_id / "metrics.json"
        data = json.loads(p.read_text())
        p.write_text(json.dumps({**data, "metadata": {"code_version": code}}))
    md = markdown(rows(tmp_path))
    assert "Code versions differ between rows: abc123, def456+dirty" in md
    assert {r["code_version"] for r in rows(tmp_path)} == {"abc123", "def456+dirty"}


def test_a_ci_excluding_zero_with_a_large_permutation_p_is_borderline():
    row = {"model": "m", "retrieval": "bm25", "reranking": "-", "rerank": "first",
           "gain_vs_no_retrieval_pct": 3.0, "gain_ci_low": 0.5, "gain_ci_high": 6.0,
           "gain_p": 0.0625, "gain_includes_zero": False, "gain_note": ""}
    assert gain_render.gain_cells(row)[2] == "borderline (CI excludes 0, p >= 0.05)"
    text = gain_render.verdict([row])
    assert "1 of 1**: m bm25 +3.0% (retrieval helps)." in text
    assert "Of these, 1 have a permutation p >= 0.05" in text
    assert gain_render.gain_cells({**row, "gain_p": 0.01})[2] == "**yes**"


def test_upper_bounds_are_shown_but_never_answer_the_headline(tmp_path):
    write_run(tmp_path, "a", "smollm2-135m", "none", 40.0, 1)
    write_run(tmp_path, "b", "smollm2-135m", "first", 41.0, 1)
    write_run(tmp_path, "o", "smollm2-135m", "oracle", 30.0, 1)
    write_run(tmp_path, "g", "smollm2-135m", "gold", 20.0, 1)
    write_run(tmp_path, "c", "gemma3-270m", "none", 31.0, 1)
    text = headline_of(tmp_path)
    assert "? No**" in text and "30.00" not in text and "20.00" not in text
    got = [(r["rerank"], r["retrieval"], r["gain_vs_no_retrieval_pct"])
           for r in rows(tmp_path) if r["model"] == "smollm2-135m"]
    # gains: (40 - 30) / 40 = 25%, (40 - 20) / 40 = 50%; gold has no retriever
    assert got == [("none", "-", None), ("first", "bm25", -2.5), ("oracle", "bm25", 25.0),
                    ("gold", "own article", 50.0)]
