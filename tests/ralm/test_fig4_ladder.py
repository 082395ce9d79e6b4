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
