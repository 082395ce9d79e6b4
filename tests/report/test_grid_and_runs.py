"""The dashboard's paper-shaped grid, the DEMO label, and the runs list (runs only)."""
from __future__ import annotations

from ragrepro.report.build import build_report
from ragrepro.report.grid import grid_cell, grid_html
from ragrepro.report.runs import load_runs
from ragrepro.report.table_stats import RowStats
from ragrepro.report.tables import NOT_RUN, TableRow, build_all
from ralm import table1
from tests.report.demo import make_run, ralm


def _row(row, col, status="ok", ours=None, paper=None, **kw):
    return TableRow(f"{row} · {col}", status, {}, ours=ours, paper=paper, paper_row=row,
                    paper_column=col, run_id="r" if ours is not None else None,
                    experiment="e", **kw)


def test_grid_has_the_papers_shape_and_folds_rows_not_run():
    rows = [_row("GPT-2 S, -, -", "WT-103", ours=36.1, paper=37.5,
                 stats=RowStats(n=9, ci_low=26.7, ci_high=48.8)),
            _row("GPT-2 S, -, -", "FreeLaw", NOT_RUN, paper=8.0),
            _row("GPT-2 M, -, -", "WT-103", NOT_RUN, paper=26.3),
            _row("GPT-2 M, -, -", "FreeLaw", NOT_RUN, paper=7.1)]
    out = grid_html(rows, "g")
    main, folded = out.split('<details class="not-run-rows">')
    assert "<th>WT-103</th><th>FreeLaw</th>" in main
    assert "GPT-2 S, -, -" in main and "GPT-2 M, -, -" not in main
    assert "<b>36.10 [26.70, 48.80]</b>" in main and "n=9" in main and "paper 37.5" in main
    assert "1 paper row(s) we have not run" in folded and "paper 26.3" in folded


def test_grid_cell_marks_a_gain_whose_ci_includes_zero():
    r = _row("BM25", "WT-103", ours=37.0, paper=29.6, ours_gain=0.026,
             stats=RowStats(n=9, ci_low=28.0, ci_high=49.0, test_low=-0.02, test_high=0.09,
                            p_value=0.43, includes_zero=True))
    cell = grid_cell([r])
    assert "vs baseline +2.6% [-2.0, +9.0] ≈0" in cell and "paper 29.6" in cell
    r.stats.includes_zero, r.stats.test_low = False, 0.01
    # a CI excluding zero with p = 0.43: the two disagree, so the cell says borderline
    assert "borderline" in grid_cell([r]) and "≠0" not in grid_cell([r])
    r.stats.p_value = 0.01
    assert "≠0" in grid_cell([r])


def test_demo_runs_are_labelled_demo_on_the_page(results):
    report = build_report(results)
    page = report.index.read_text()
    assert 'id="demo-banner"' in page and "made-up numbers" in page
    assert page.count('<span class="run-demo">DEMO</span>') == len(report.runs)
    md = (results / "report/ralm/table1.md").read_text()
    assert "DEMO DATA" in md


def test_a_table_builders_summary_csv_is_not_read_as_runs(results):
    n = len(load_runs(results))
    table1.build("ralm/table1", results)            # writes ralm/table1_summary.csv
    assert (results / "ralm/table1_summary.csv").exists()
    runs = load_runs(results)
    assert len(runs) == n
    assert not any(r.experiment.endswith("_summary") for r in runs)


def test_runs_sharing_a_paper_cell_are_labelled_by_what_differs():
    a = _row("GPT-2 S, -, -", "WT-103", ours=36.1, settings={"model": "smollm2-135m", "k": 4})
    b = _row("GPT-2 S, -, -", "WT-103", ours=37.7, settings={"model": "gemma3-270m", "k": 4})
    cell = grid_cell([a, b])
    assert '<span class="label">smollm2-135m: </span><b>36.10 [no CI]</b>' in cell
    assert '<span class="label">gemma3-270m: </span><b>37.70 [no CI]</b>' in cell


def test_runs_sharing_a_cell_get_a_label_from_every_recorded_setting(results):
    # the same cell as r1bm25, differing only in a setting the table does not show
    make_run(results, "ralm/table1", "r1bm25b", ralm("smollm2-135m", "bm25", "first",
                                                     retrieval_stride=8),
             {"ppl_word": 31.0, "ppl_token": 16.5})
    table = next(t for t in build_all(results, names=["ralm/table1"]))
    rows = [r for r in table.rows if r.cell == "GPT-2 S, BM25, - · WT-103"]
    assert sorted(r.label for r in rows) == ["retrieval_stride=8", "retrieval_stride=None"]
    assert all(r.note.startswith("one of 2 runs in this cell: retrieval_stride=") for r in rows)
    cell = grid_cell(rows)
    assert "retrieval_stride=8: </span><b>31.00" in cell
