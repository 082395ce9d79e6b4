"""Table cells keyed on every recorded setting (ragrepro.report.keyed)."""
from __future__ import annotations

import pytest

from ragrepro.errors import DataError
from ragrepro.report.keyed import (
    KeyedRun,
    constant,
    distinguishing,
    one_per_cell,
    refuse_indistinguishable,
    varying,
)


def test_varying_treats_missing_as_null_and_ignores_bookkeeping():
    a = {"k": 4, "stride": 16, "run_id": "a", "finished_at": "t1"}
    b = {"k": 4, "stride": 32, "run_id": "b", "finished_at": "t2", "extra": None}
    assert varying([a, b]) == ["stride"]
    assert varying([a, {**a, "new": 1}]) == ["new"]
    assert constant([a, b]) == {"k": 4}


def test_distinguishing_names_settings_that_split_one_cell():
    runs = [KeyedRun("a", {"model": "m", "rerank": "none", "stride": 16}, {}),
            KeyedRun("b", {"model": "m", "rerank": "none", "stride": 32}, {}),
            KeyedRun("c", {"model": "m", "rerank": "first", "k": 4}, {})]
    assert distinguishing(runs, lambda r: (r.settings["model"], r.settings["rerank"])) == [
        "stride"]


def test_identical_settings_are_refused_naming_the_config_keys():
    runs = [KeyedRun("a", {"model": "m"}, {"ralm": {"k": 4}, "wandb": {"mode": "x"}}),
            KeyedRun("b", {"model": "m"}, {"ralm": {"k": 8}, "wandb": {"mode": "y"}})]
    with pytest.raises(DataError, match=r"runs a, b record the same settings.*ralm\.k "
                                        r"\(4 vs 8\)\. Make the pipeline record"):
        refuse_indistinguishable(runs, "t")
    same = [KeyedRun("a", {"model": "m"}, {}), KeyedRun("b", {"model": "m"}, {})]
    with pytest.raises(DataError, match="nothing recorded"):
        refuse_indistinguishable(same, "t")


def test_one_per_cell_keeps_distinct_cells_and_refuses_a_shared_one():
    rows = [{"run_id": "a", "setting": "full", "limit": "24"},
            {"run_id": "b", "setting": "filco", "limit": "24"}]
    assert one_per_cell(rows, ["setting"], "t", dict) == rows
    with pytest.raises(DataError, match=r"runs a, c fill the same cell \(setting=full\) but "
                                        r"differ in limit"):
        one_per_cell([*rows, {"run_id": "c", "setting": "full", "limit": "5"}], ["setting"],
                     "t", dict)
