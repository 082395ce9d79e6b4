"""Sweep plots are checked through the series they plot (the JSON next to each figure)."""
from __future__ import annotations

import json

import pytest

from ragrepro.report.build import build_report
from ragrepro.report.demo import make_run, ralm
from ragrepro.report.plots import plot_data
from ragrepro.report.runs import load_runs
from ragrepro.report.spec import load_metric_infos, load_plot_specs


def _spec(name):
    return next(s for s in load_plot_specs() if s["name"] == name)


def test_stride_plot_one_line_per_model(results):
    build_report(results)
    plots = results / "report" / "plots"
    data = json.loads((plots / "ralm_fig5_stride.json").read_text())
    assert (plots / "ralm_fig5_stride.png").stat().st_size > 1000
    assert (plots / "ralm_fig5_stride.svg").read_text().lstrip().startswith("<?xml")
    lines = {s["label"]: [(p["x"], p["y"]) for p in s["points"]] for s in data["series"]}
    # fixture: ppl_word = base + stride, base 30 (smollm2) / 20 (gemma3)
    assert lines == {"smollm2-135m": [(2, 32.0), (4, 34.0), (8, 38.0)],
                     "gemma3-270m": [(2, 22.0), (4, 24.0), (8, 28.0)]}
    assert data["x_label"] == "retrieval stride s (tokens)"
    assert data["y_label"] == "word-level perplexity"
    assert data["metrics"] == ["ppl_word"] and data["n_runs"] == 6


def test_empty_plot_says_not_run(results):
    build_report(results)
    data = json.loads((results / "report/plots/riches_beam_f1.json").read_text())
    assert data["series"] == [] and data["n_runs"] == 0
    assert (results / "report/plots/riches_beam_f1.png").exists()


def test_seeds_are_averaged_and_varying_settings_split_lines(tmp_path):
    root = tmp_path / "results"
    for seed, ppl in ((0, 10.0), (1, 12.0)):
        make_run(root, "ralm/fig6", f"q{seed}", ralm("smollm2-135m", "bm25", "first",
                                                     query_len=16, seed=seed), {"ppl_word": ppl})
    make_run(root, "ralm/fig6", "qlim", ralm("smollm2-135m", "bm25", "first", query_len=16,
                                             limit=10), {"ppl_word": 50.0})
    data = plot_data(_spec("ralm_fig6_query_len"), load_runs(root), load_metric_infos())
    by_limit = {s.keys["limit"]: s.points for s in data.series}
    assert set(by_limit) == {"50", "10"}         # limit differs: never averaged together
    (p,) = by_limit["50"]
    assert p.x == 16 and p.y == pytest.approx(11.0) and p.n == 2
    assert sorted(p.run_ids) == ["q0", "q1"]


def test_percent_metrics_are_scaled_and_bars_work(tmp_path):
    root = tmp_path / "results"
    make_run(root, "ralm/fig8", "d0", {"model": "smollm2-135m", "dataset": "vital-qa",
                                       "num_docs": 0}, {"em_squad": 0.1})
    make_run(root, "ralm/fig8", "d2", {"model": "smollm2-135m", "dataset": "vital-qa",
                                       "num_docs": 2}, {"em_squad": 0.25})
    data = plot_data(_spec("ralm_fig8_qa_docs"), load_runs(root), load_metric_infos())
    assert [(p.x, p.y) for p in data.series[0].points] == [(0, pytest.approx(10.0)),
                                                           (2, pytest.approx(25.0))]
    assert "%" in data.y_label
