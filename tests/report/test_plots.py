"""Sweep plots are checked through the series they plot (the JSON next to each figure)."""
from __future__ import annotations

import json
import math

import pytest

from ragrepro.report.build import build_report
from ragrepro.report.plots import plot_data
from ragrepro.report.runs import load_runs
from ragrepro.report.spec import load_metric_infos, load_plot_specs
from ragrepro.tracking import Run
from tests.report.demo import make_run, ralm


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


def test_single_run_points_carry_their_95_ci_as_error_bars(tmp_path):
    root = tmp_path / "results"
    for stride, nlls in ((2, [30.0, 50.0]), (4, [40.0, 40.0])):
        run = Run("ralm/fig5", f"s{stride}", root)
        run.start()
        for i, x in enumerate(nlls):   # two blocks of 128 scored tokens, 100 words in all
            run.add_sample({"text": 0, "window": i, "nll_sum": x, "n_scored": 128})
        run.finish({}, {"ppl_word": math.exp(80 / 100), "n_words": 100, "n_tokens": 256},
                   ralm("smollm2-135m", "bm25", "first", stride=stride,
                        retrieval_stride=stride), {})
    data = plot_data(_spec("ralm_fig5_stride"), load_runs(root), load_metric_infos())
    points = {p.x: p for p in data.series[0].points}
    # a resample of two blocks is exp(60/100) (p=1/4), exp(80/100) (1/2) or exp(100/100)
    # (1/4): with 2000 resamples the 2.5% and 97.5% quantiles are the two extremes
    assert points[2].low < points[2].y < points[2].high
    assert (points[2].low, points[2].high) == pytest.approx((math.exp(0.6), math.exp(1.0)))
    # equal blocks: every resample gives the same perplexity, a zero-width bar
    assert points[4].low == pytest.approx(points[4].y) == pytest.approx(points[4].high)
