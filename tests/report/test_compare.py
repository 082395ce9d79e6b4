"""`ragrepro compare`: differing settings and metrics side by side."""
from __future__ import annotations

import pytest

from ragrepro.errors import ConfigError
from ragrepro.report.compare import differing, flatten, main
from ragrepro.tracking import Run


def test_flatten_and_differing():
    a = flatten({"model": {"name": "x", "rev": None}, "k": 16, "wandb": {"mode": "offline"}})
    b = flatten({"model": {"name": "y", "rev": None}, "wandb": {"mode": "online"}})
    assert a == {"model.name": "x", "model.rev": None, "k": 16, "wandb.mode": "offline"}
    assert differing([a, b], ("wandb.",)) == [("k", [16, "(unset)"]),
                                              ("model.name", ["x", "y"])]


def test_compare_by_ids_and_folder(results, capsys):
    main(["r1base", str(results / "ralm/table1/r1rerank"), "--results", str(results)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(ln.split() == ["retriever", "None", "bm25"] for ln in lines)
    assert any(ln.split() == ["rerank", "none", "zeroshot"] for ln in lines)
    assert any(ln.split() == ["ppl_word", "40", "28"] for ln in lines)
    assert any(ln.split() == ["ppl_token", "20", "15"] for ln in lines)
    # same in both runs: not listed among the differences
    settings_block = out.split("Settings that differ:")[1].split("Metrics:")[0]
    assert "stride" not in settings_block and "query_len" not in settings_block
    assert "config.wandb" not in settings_block


def test_compare_prefix_and_errors(results, capsys):
    main(["ralm/table1/r1bm25", "r1reran", "--results", str(results)])
    assert "[2] ralm/table1/r1rerank" in capsys.readouterr().out
    # user errors: ragrepro.cli prints them and exits 2 (tests/reliability/test_bad_values_cli.py)
    with pytest.raises(ConfigError, match="'r1' matches 3 runs"):
        main(["r1", "r1base", "--results", str(results)])      # ambiguous prefix
    with pytest.raises(ConfigError, match="No run 'nosuchrun'"):
        main(["nosuchrun", "r1base", "--results", str(results)])


def _qa_run(root, run_id, em):
    run = Run("ralm/table4", run_id, root)
    run.start()
    for i, v in enumerate(em):
        run.add_sample({"qid": f"q{i}", "em": v})
    run.finish({"name": "ralm/table4"}, {"em": sum(em) / len(em), "num_examples": len(em)},
               {"model": "m", "num_docs": run_id}, {})


def test_compare_shows_ci_and_the_paired_test_against_the_first_run(tmp_path, capsys):
    _qa_run(tmp_path, "zero", [0.0, 0.0, 0.0])
    _qa_run(tmp_path, "one", [1.0, 1.0, 1.0])
    _qa_run(tmp_path, "same", [0.0, 0.0, 0.0])
    main(["zero", "one", "same", "--results", str(tmp_path), "--resamples", "200"])
    out = capsys.readouterr().out
    metrics = out.split("Metrics (value [95% CI] n")[1].split("Paired against")[0]
    # every resample of identical values has the same mean: the CI is a point
    assert any(ln.split() == ["em", "0", "[0,", "0]", "n=3", "1", "[1,", "1]", "n=3", "0",
                              "[0,", "0]", "n=3"] for ln in metrics.splitlines())
    paired = out.split("Paired against [1]")[1]
    assert "200 resamples, seed 0" in paired
    em = next(ln for ln in paired.splitlines() if ln.startswith("em "))
    # one vs zero: +1 on every question; exact permutation p = 2 / 2**3: the bootstrap CI
    # excludes zero but three questions cannot give p < 0.05, so the mark is borderline
    assert "+1 [+1, +1] p=0.25 borderline" in em
    assert "+0 [+0, +0] p=1 ≈0 (CI includes 0)" in em
