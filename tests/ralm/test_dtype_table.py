"""scripts/dtype_table.py: float32 against bfloat16 from two finished runs, refusing a pair
that differs in anything but dtype and naming the command when a run is missing."""
from __future__ import annotations

from pathlib import Path

import pytest

from ragrepro.errors import DataError
from ragrepro.report.runs import RunRecord
from scripts import dtype_table


def _run(dtype: str, started: float, **settings) -> RunRecord:
    base = {"model": "qwen2.5-coder-0.5b", "dataset": "wiki-vital", "stride": 16,
            "dtype": dtype, **settings}
    return RunRecord(dtype_table.EXPERIMENTS[dtype], f"id{started:g}", {}, Path("."),
                     metrics_json={"settings": base, "metrics": {"ppl_word": 1.0},
                                   "metadata": {"started_at": started}})


def test_a_pair_that_differs_beyond_dtype_is_refused():
    same = {"float32": _run("float32", 1), "bfloat16": _run("bfloat16", 2)}
    dtype_table.check_same_settings(same)  # dtype alone differs: accepted
    other = {**same, "bfloat16": _run("bfloat16", 2, stride=8)}
    with pytest.raises(DataError, match=r"differ in stride \(16, 8\).*rerun one"):
        dtype_table.check_same_settings(other)


def test_the_latest_run_of_the_dtype_is_used_and_a_missing_one_names_the_command(monkeypatch):
    runs = [_run("float32", 5), _run("float32", 9), _run("bfloat16", 7)]
    monkeypatch.setattr(dtype_table, "experiment_runs", lambda root, exp: runs)
    assert dtype_table.latest_run(Path("."), "ralm/ladder_f32", "float32").run_id == "id9"
    monkeypatch.setattr(dtype_table, "experiment_runs", lambda root, exp: [])
    with pytest.raises(DataError, match=r"No finished bfloat16 run .*dtype=bfloat16 "
                                        r"name=ralm/ladder_f32\|ralm/ladder_bf16"):
        dtype_table.latest_run(Path("."), "ralm/ladder_bf16", "bfloat16")
