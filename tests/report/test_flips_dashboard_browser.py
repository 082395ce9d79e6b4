"""The dashboard's per-sample flips view as a person sees it: headless Chromium opens
results/index.html from disk, two runs are ticked, and the view shows what
`ragrepro compare A B --flips` computes (ragrepro.report.flips), in the order ticked: the
hand-written QA runs of flips_fixtures.py and two real RALM perplexity runs of the committed
Table 1 evidence."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrepro import evidence
from ragrepro.paths import REPO_ROOT
from ragrepro.report.build import build_report
from ragrepro.report.compare import _paired_cell
from ragrepro.report.dashboard import FLIPS_WIDTH
from ragrepro.report.flips import LABELS, NLL_COUNTS, OUTCOME_COUNTS, item_texts, pair_flips
from ragrepro.report.runs import load_runs
from ragrepro.report.samples import DEFAULT_STATS
from tests.report.conftest import table_cells
from tests.report.flips_fixtures import qa_run

pytestmark = pytest.mark.browser


def _tick(b, *run_ids: str) -> None:
    b.eval("document.getElementById('clear-selection').click()")
    for run_id in run_ids:
        b.eval(f"document.querySelector('tr[data-run-id=\"{run_id}\"] input.sel').click()")


def _text(b, element_id: str) -> str:
    return b.eval(f"document.getElementById({json.dumps(element_id)}).innerText.trim()")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    qa_run(root, "qa0docs", 0, 0)
    qa_run(root, "qa2docs", 1, 2)
    evidence.unpack(evidence.bundle_path(REPO_ROOT / "results", "ralm/table1"), root)
    return root


def test_flips_view_in_chromium(results, browser):
    report = build_report(results)
    runs = {r.run_id: r for r in load_runs(results)}
    b = browser
    b.open(report.index)

    # QA, ticked the other way round from how the page stores the pair: [1] = qa2docs
    _tick(b, "qa2docs", "qa0docs")
    a, c = runs["qa2docs"], runs["qa0docs"]
    f, _ = pair_flips(a, c)
    assert f is not None
    assert table_cells(b, "#flips-counts tr") == [[LABELS[k] for k in OUTCOME_COUNTS],
                                             ["2", "1", "1", "1"]]
    assert [f.counts[k] for k in OUTCOME_COUNTS] == [2, 1, 1, 1]
    assert _text(b, "flips-rule") == "em on 5 questions; right = em 1 (0/1 score)"
    assert _text(b, "flips-paired") == \
        f"paired em ([2] - [1]): {_paired_cell(a, c, 'em', DEFAULT_STATS)}"
    ta, tc = item_texts(a, f, f.items, FLIPS_WIDTH), item_texts(c, f, f.items, FLIPS_WIDTH)
    expected = [[LABELS[i.change], i.label, ta[i.label]["question"], ta[i.label]["gold"],
                 ta[i.label]["output"], tc[i.label]["output"], f"{i.a:g}", f"{i.b:g}",
                 ta[i.label]["finish"], tc[i.label]["finish"]] for i in f.items]
    rows = table_cells(b, "#flips-items tr[data-key]")
    assert rows == expected
    assert [r[:2] for r in rows] == [["right→wrong", "q1"], ["right→wrong", "q4"],
                                     ["wrong→right", "q0"]]
    assert rows[2][4:] == ["Lyon", "Paris", "0", "1", "length", "eos"]

    # perplexity: no retrieval against BM25 for SmolLM2; blocks with each side's documents
    none = next(r for r in runs.values() if r.settings.get("model") == "smollm2-135m"
                and r.settings.get("rerank") == "none")
    bm25 = next(r for r in runs.values() if r.settings.get("model") == "smollm2-135m"
                and r.settings.get("rerank") == "first")
    _tick(b, none.run_id, bm25.run_id)
    f, _ = pair_flips(none, bm25)
    assert f is not None
    assert table_cells(b, "#flips-counts tr") == [list(NLL_COUNTS), ["5", "3", "1"]]
    assert _text(b, "flips-paired") == \
        f"paired ppl_token ([2] - [1]): {_paired_cell(none, bm25, 'ppl_token', DEFAULT_STATS)}"
    rows = table_cells(b, "#flips-items tr[data-key]")
    assert [(r[0], r[1]) for r in rows] == [(i.change, i.label) for i in f.items]
    first = rows[0]
    item = f.items[0]
    assert first[:5] == ["worse", "text 0 windows 17-24", f"{item.a:.4f}", f"{item.b:.4f}",
                         f"{item.delta:+.4f}"]
    docs_a = [w["doc"] for w in item_texts(none, f, [item], FLIPS_WIDTH)[item.label]]
    docs_b = [w["doc"] for w in item_texts(bm25, f, [item], FLIPS_WIDTH)[item.label]]
    assert first[5].split("\n") == [str(w) for w in range(17, 25)]
    assert first[7].split("\n") == docs_a == ["(no document)"] * 8
    assert first[8].split("\n") == docs_b and docs_b[0].endswith("[vital-2936]")

    # runs of two experiments score different examples: no flips, and the page says why
    _tick(b, "qa0docs", none.run_id)
    assert _text(b, "flips-none") == "None: the two runs belong to different experiments."
