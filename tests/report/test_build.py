"""`ragrepro report`: files, the W&B offline notice, and the data embedded in index.html."""
from __future__ import annotations

import json
import re
import shutil
import sys
import types

from ragrepro.report.build import build_report, main


def _embedded_runs(index_html: str) -> list[dict]:
    m = re.search(r'<script type="application/json" id="runs-data">(.*?)</script>',
                  index_html, re.DOTALL)
    assert m
    return json.loads(m.group(1).replace("<\\/", "</"))


def test_report_files_and_offline_sync_command(results, capsys):
    main(["--results", str(results)])
    out = capsys.readouterr().out
    offline_dir = results / "ralm/table1/r1rerank/wandb/offline-run-20260101_000000-r1rerank"
    assert f"wandb sync {offline_dir}" in out
    assert "ralm/table1/r1rerank" in out and "1 run(s) are on W&B offline only" in out
    assert "ralm/table1: 77 not run, 3 ok" in out
    for name in ("ralm/table1", "filco/table5", "filco/fig4_delta", "riches/main_f1"):
        for ext in ("md", "html", "json"):
            assert (results / "report" / f"{name}.{ext}").exists(), (name, ext)
    html = (results / "index.html").read_text()
    assert "<script src" not in html and "<link" not in html and "http://" not in html
    assert f"wandb sync {offline_dir}" in html


def test_index_embeds_configs_metrics_and_links(results):
    report = build_report(results)
    html = report.index.read_text()
    runs = {r["run_id"]: r for r in _embedded_runs(html)}
    assert len(runs) == 13
    r = runs["r1bm25"]
    assert r["href"] == "ralm/table1/r1bm25/"
    assert r["wandb_url"] == "https://wandb.ai/me/ragrepro/runs/r1bm25"
    assert r["metrics"]["ppl_word"] == 30.0 and r["config"]["retriever"] == "bm25"
    assert '<a href="ralm/table1/r1bm25/">r1bm25</a>' in html
    assert '<a href="https://wandb.ai/me/ragrepro/runs/r1bm25">online</a>' in html
    assert 'src="report/plots/ralm_fig5_stride.png"' in html


def test_empty_results_still_build(tmp_path):
    report = build_report(tmp_path / "results")
    assert report.runs == [] and report.index.exists()
    rows = json.loads((tmp_path / "results/report/ralm/table1.json").read_text())["rows"]
    assert len(rows) == 80 and {r["status"] for r in rows} == {"not run"}


def test_tables_logged_as_wandb_tables(results, monkeypatch, capsys):
    logged: dict = {}

    class FakeTable:
        def __init__(self, columns, data):
            self.columns, self.data = columns, data

    class FakeRun:
        url = "https://wandb.ai/me/ragrepro/runs/report"

        def log(self, d):
            logged.update(d)

        def finish(self):
            logged["finished"] = True

    fake = types.SimpleNamespace(Table=FakeTable, init=lambda **kw: logged.update(init=kw)
                                 or FakeRun())
    monkeypatch.setitem(sys.modules, "wandb", fake)
    main(["--results", str(results), "--wandb", "offline"])
    assert logged["finished"] and logged["init"]["group"] == "report"
    assert logged["init"]["mode"] == "offline"
    table = logged["report/ralm/table1"]
    rows = {r[0]: dict(zip(table.columns, r)) for r in table.data}
    r = rows["GPT-2 S, BM25, zero-shot · WT-103"]
    assert r["ours"] == 28.0 and r["paper"] == 28.6 and r["stride"] == 4
    assert r["ours_gain"] == -0.3
    assert "Logged 13 table(s) to W&B" in capsys.readouterr().out


def test_csv_row_without_folder_and_unknown_columns(results, caplog):
    """Issue 28: the CSV is an index of the run folders, never trusted over them. A row whose
    folder is gone is dropped and a column no run records is removed, each with a warning
    naming the CSV; the rewritten CSV holds the rows the folders give."""
    shutil.rmtree(results / "ralm/table1/r1bm25")        # folder gone, CSV row kept
    csv = results / "ralm/table1.csv"
    text = csv.read_text().splitlines()
    text[0] += ",brand_new_setting"
    text[1] += ",42"
    csv.write_text("\n".join(text) + "\n")
    report = build_report(results)
    runs = {r["run_id"]: r for r in _embedded_runs(report.index.read_text())}
    assert sorted(r for r in runs if r.startswith("r1")) == ["r1base", "r1rerank"]
    assert f"{csv}: column 'brand_new_setting'" in caplog.text
    assert f"{csv}:3: a row (naming no finished run)" in caplog.text
    rewritten = csv.read_text()
    assert "brand_new_setting" not in rewritten and "r1bm25" not in rewritten
    assert [line.split(",")[0] for line in rewritten.splitlines()] == ["run_id", "r1base",
                                                                        "r1rerank"]
    table = next(t for t in report.tables if t.name == "ralm/table1")
    assert not [r for r in table.rows if r.run_id == "r1bm25"]
