"""The ladder verdict of scripts/fig4_ladder.py and its table from finished runs only."""
from __future__ import annotations

from pathlib import Path

from scripts.fig4_ladder import Cell, render, verdict


def test_verdict_follows_the_paired_interval():
    assert verdict(-0.05, includes_zero=False) == "reaches (lower perplexity)"
    assert verdict(0.02, includes_zero=True) == "reaches (not distinguishable)"
    assert verdict(0.60, includes_zero=False) == "does not reach"


def test_missing_cells_say_not_run(tmp_path: Path):
    small = Cell("qwen2.5-coder-0.5b", "none", "bfloat16", tmp_path / "a", {"ppl_word": 48.7})
    text = render("wiki-vital", [small])
    row = next(line for line in text.splitlines() if line.startswith("| qwen2.5-coder-0.5b"))
    assert row.split(" | ")[3].startswith("48.70 [no CI]")   # no records: no interval claimed
    assert "0.5B + BM25: not run" in text


def test_data_line_names_the_shared_settings_only(tmp_path: Path):
    from scripts.fig4_ladder import data_line

    a = Cell("m", "none", "float32", tmp_path, {"ppl_word": 1.0},
             {"dataset": "wiki-vital", "split": "test", "limit": 10, "stride": 16})
    b = Cell("m", "first", "float32", tmp_path, {"ppl_word": 1.0},
             {"dataset": "wiki-vital", "split": "test", "limit": 10, "stride": 8})
    assert data_line([a, b]) == "Data and settings: dataset=wiki-vital, split=test, limit=10."


def test_model_sizes_come_from_the_table1_spec():
    from scripts.fig4_ladder import model_params_m

    sizes = model_params_m()
    assert round(sizes["qwen2.5-coder-1.5b"]) == 1540 and round(sizes["smollm2-135m"]) == 135
