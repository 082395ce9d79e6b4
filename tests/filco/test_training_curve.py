"""scripts/filco_curve.py: one line per fine-tuned model, sampled steps, smoothed tail."""
from __future__ import annotations

import json

import pytest

from scripts import filco_curve


def _meta(setting, gen_key, losses, role="gen-silver", filt=None):
    gen = {"key": gen_key, "role": role, "base": "qwen", "n_pairs": 175, "steps": len(losses),
           "losses": losses}
    # a metrics.json as Run.write_results writes it: "metrics" and "settings" always there
    return {"metrics": {}, "settings": {"setting": setting},
            "metadata": {"generator_train": gen, "filter_train": filt}}


def test_times_per_cell_sum_the_stages():
    meta = {"settings": {"setting": "filco", "n_eval": 60},
            "timings_s": {"filter": 100.4, "generator": 250.0, "silver": 0.2}}
    assert "| filco | 60 | 100 | 250 | 351 |" in filco_curve.render_times([meta])


def test_curve_points_keep_first_and_last():
    assert filco_curve.curve_points([5.0, 4.0, 3.0], points=6) == [(1, 5.0), (2, 4.0), (3, 3.0)]
    pts = filco_curve.curve_points([float(i) for i in range(22)], points=6)
    # steps 1, 5.2->5, 9.4->9, 13.6->14, 17.8->18, 22 (1-based)
    assert [s for s, _ in pts] == [1, 5, 9, 14, 18, 22]


def test_shared_model_listed_once_with_both_settings(tmp_path, monkeypatch):
    ctx = {"key": "c1", "role": "ctx", "base": "qwen", "n_pairs": 175, "steps": 2,
           "losses": [2.0, 1.0]}
    metas = [_meta("filco", "g1", [3.0, 2.0, 1.0, 1.0, 1.0, 0.5], filt=ctx),
             _meta("silver", "g1", [3.0, 2.0, 1.0, 1.0, 1.0, 0.5]),
             _meta("full", "g2", [4.0, 3.5], role="gen-full")]
    models = filco_curve.trained_models(metas)
    assert [(m["role"], sorted(m["used_by"])) for m in models] == [
        ("ctx", ["filco"]), ("gen-full", ["full"]), ("gen-silver", ["filco", "silver"])]
    md = filco_curve.render(models, "t")
    # mean of the last 5 losses of g1: (2+1+1+1+0.5)/5 = 1.1
    assert "| qwen (gen-silver) | filco, silver | 175 | 6 |" in md and md.rstrip().endswith("1.100 |")
    runs = tmp_path / "filco" / "x"
    for i, m in enumerate(metas):
        (runs / str(i)).mkdir(parents=True)
        (runs / str(i) / "metrics.json").write_text(json.dumps(m))
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path))
    filco_curve.main(["filco/x", "--out", str(tmp_path / "c.md")])
    written = (tmp_path / "c.md").read_text()
    assert written.startswith(filco_curve.render(models, "FilCo training curves: filco/x"))
    assert "| full | None | 0 | 0 | 0 |" in written  # no timings recorded: zeros, not a crash


def test_no_runs_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path))
    with pytest.raises(SystemExit, match="No finished runs"):
        filco_curve.main(["filco/none"])
