"""scripts/ralm_figures.py: a figure's cells paired against Table 1's no-retrieval run with the
same settings (the query length and retrieval stride are retrieval-only settings)."""
from __future__ import annotations

import pytest

from scripts import ralm_figures
from tests.report.table_fixtures import BASE, ralm_run


def test_swept_settings_come_from_the_experiment_yaml():
    assert ralm_figures.swept_settings("ralm/fig6") == ["query_len"]
    assert ralm_figures.swept_settings("ralm/fig5") == ["retrieval_stride"]
    assert ralm_figures.swept_settings("ralm/fig3") == ["retriever"]
    assert ralm_figures.swept_settings("ralm/table3") == ["scorer_model"]
    assert ralm_figures.swept_settings("ralm/fig4") == ["model", "rerank"]


def test_cells_pair_with_table1_none_across_query_lengths(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path))
    ralm_run(tmp_path, "ralm/table1", "n", "smollm2-135m", "none", BASE, 1, query_len=8)
    # every window's NLL 10% lower: perplexity exp(0.9 x) -> gain 1 - exp(-0.1 * sum/100)
    for q, f in ((32, 0.9), (8, 1.0)):
        ralm_run(tmp_path, "ralm/fig6", f"q{q}", "smollm2-135m", "first",
                 [x * f for x in BASE], 2, query_len=q)
    # a different evaluation stride has no reference: said, not paired with the wrong run
    ralm_run(tmp_path, "ralm/fig6", "s32", "smollm2-135m", "first", BASE, 3, query_len=16,
             stride=32)
    rows = ralm_figures.figure_rows("ralm/fig6", tmp_path, ralm_figures.gain_spec())
    assert [r["swept"] for r in rows] == ["query_len=8", "query_len=16", "query_len=32"]
    by = {r["swept"]: r for r in rows}
    assert by["query_len=8"]["gain_vs_no_retrieval_pct"] == 0.0
    total = sum(BASE)
    import math
    want = 100 * (1 - math.exp(-0.1 * total / 100))
    assert by["query_len=32"]["gain_vs_no_retrieval_pct"] == pytest.approx(want, abs=0.05)
    assert by["query_len=32"]["baseline_run_id"] == "n"
    assert by["query_len=16"]["gain_vs_no_retrieval_pct"] is None
    md = ralm_figures.render({"ralm/fig6": rows, "ralm/fig3": []})
    assert "| fig6: BM25 query length | query_len=32 | smollm2-135m | bm25 | - | 8 |" in md
    assert "no reference run" in md and "Not run yet: ralm/fig3." in md
