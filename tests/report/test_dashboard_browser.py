"""results/index.html as a person sees it: headless Chromium opens the page from disk,
reads the tables through the DOM, filters, sorts, selects runs to compare, and saves a
screenshot of the demo page (in the test's tmp folder, never over the README's)."""
from __future__ import annotations

import json

import pytest

from ragrepro.report.build import build_report
from tests.report.conftest import table_cells

pytestmark = pytest.mark.browser


def _set(b, element_id: str, value: str, event: str) -> None:
    """Type into an input / pick an option, firing the event a person's action fires."""
    b.eval(f"{{ const e = document.getElementById({json.dumps(element_id)}); "
           f"e.value = {json.dumps(value)}; e.dispatchEvent(new Event({json.dumps(event)})); }}")


def _visible_ids(b) -> list[str]:
    return b.eval("Array.from(document.querySelectorAll('#runs-table tbody tr'))"
                  ".filter(tr => tr.style.display !== 'none').map(tr => tr.dataset.runId)")


def test_dashboard_in_chromium(results, browser):
    report = build_report(results)
    b = browser
    b.open(report.index)
    assert b.eval("document.title") == "ragrepro results"
    assert len(_visible_ids(b)) == 13

    # Demo data says so on the page itself.
    assert "DEMO DATA" in b.eval("document.getElementById('demo-banner').innerText")

    # The paper-shaped grid shows the rows we ran; the others are folded away.
    grid = {r[0]: r[1:] for r in table_cells(b, "#grid-ralm-table1 tbody tr")}
    assert sorted(grid) == ["GPT-2 S, -, -", "GPT-2 S, BM25, -", "GPT-2 S, BM25, zero-shot"]
    assert grid["GPT-2 S, BM25, zero-shot"][0].split("\n") == [
        "28.00 [no CI]", "vs baseline -30.0% [no CI]", "paper 28.6"]
    assert b.eval("document.querySelector('#sec-ralm-table1 details.not-run-rows').open") \
        is False

    # The full table (one click away) holds our number, n, the paper's, the difference, the
    # reproduction verdict (demo rows are mini scale: never comparable) and both gains.
    for sec in ("ralm-table1", "filco-table5"):
        b.eval(f"document.querySelector('#sec-{sec} details.all-rows').open = true")
    rows = {r[0]: r for r in table_cells(b, "#table-ralm-table1 tbody tr")}
    assert len(rows) == 80
    assert rows["GPT-2 S, BM25, zero-shot · WT-103"][1:8] == [
        "28.00 [no CI]", "", "28.6", "-0.60", "not comparable: scale=mini vs paper (+5 more)",
        "-30.0% [no CI]", "-23.7%"]
    assert rows["GPT-2 M, BM25, - · WT-103"][1:4] == ["not run", "", "21.5"]
    filco = {r[0]: r for r in table_cells(b, "#table-filco-table5 tbody tr")}
    assert filco["FilCo, top-5 · NQ"][1:8] == ["52.00 [no CI]", "", "61.8", "-9.80",
                                               "not comparable: scale=mini vs paper (+4 more)",
                                               "+30.0% [no CI]", "+29.8%"]

    # The runs table shows each run's metrics; sorting by ppl_word orders them.
    col = b.eval("Array.from(document.querySelectorAll('#runs-table thead th'))"
                 ".findIndex(th => th.dataset.col === 'ppl_word')")
    assert col > 0
    b.eval(f"document.querySelectorAll('#runs-table thead th')[{col}].click()")
    values = b.eval(f"Array.from(document.querySelectorAll('#runs-table tbody tr'))"
                    f".map(tr => tr.cells[{col}].innerText.trim()).filter(Boolean).map(Number)")
    assert values == sorted(values) and values[0] == 22.0 and len(values) == 9

    # Filtering: free text, then the experiment menu.
    _set(b, "filter", "gemma3 fig5", "input")
    assert sorted(_visible_ids(b)) == ["f5gemma2", "f5gemma4", "f5gemma8"]
    assert b.eval("document.getElementById('shown-count').textContent") == "3 of 13 runs shown"
    _set(b, "filter", "", "input")
    _set(b, "experiment-filter", "filco/table5", "change")
    assert sorted(_visible_ids(b)) == ["t5filco", "t5full"]
    _set(b, "experiment-filter", "", "change")

    # Selecting two runs shows the settings that differ and the metrics side by side.
    for run_id in ("r1base", "r1rerank"):
        b.eval(f"document.querySelector('tr[data-run-id=\"{run_id}\"] input.sel').click()")
    diff = {r[0]: r[1:] for r in table_cells(b, "#compare-settings tr[data-key]")}
    assert diff["settings.retriever"] == ["null", "bm25"]
    assert diff["settings.rerank"] == ["none", "zeroshot"]
    assert diff["settings.scorer_model"] == ["(unset)", "smollm2-135m"]
    assert not any(k.endswith("stride") for k in diff)
    assert "config.retriever" not in diff            # shown once, as a setting
    metrics = {r[0]: r[1:] for r in table_cells(b, "#compare-metrics tr[data-key]")}
    assert metrics["ppl_word"] == ["40", "28"] and metrics["ppl_token"] == ["20", "15"]
    assert b.eval("document.querySelectorAll('#runs-table tr.selected').length") == 2

    b.eval("window.scrollTo(0, 0)")
    # demo data never becomes the README screenshot: that one comes from real runs
    # (scripts/screenshot_report.py)
    shot = b.screenshot(results.parent / "demo_screenshot.png")
    assert shot.stat().st_size > 10_000

    b.eval("document.getElementById('clear-selection').click()")
    assert b.eval("document.querySelectorAll('#compare-settings').length") == 0
