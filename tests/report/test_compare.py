"""`ragrepro compare`: differing settings and metrics side by side."""
from __future__ import annotations

import pytest

from ragrepro.report.compare import differing, flatten, main


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


def test_compare_prefix_and_errors(results, capsys, caplog):
    main(["ralm/table1/r1bm25", "r1reran", "--results", str(results)])
    assert "[2] ralm/table1/r1rerank" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["r1", "r1base", "--results", str(results)])      # ambiguous prefix
    assert "'r1' matches 3 runs" in caplog.text
    with pytest.raises(SystemExit):
        main(["nosuchrun", "r1base", "--results", str(results)])
    assert "No run 'nosuchrun'" in caplog.text
