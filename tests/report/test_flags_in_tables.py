"""The flags cell in every table, `ragrepro compare` and the dashboard: present when a run
records diagnostics, naming what crossed conf/report/flags.yaml's thresholds; absent (not
"0%") for runs made before the diagnostics existed."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from ragrepro.report import results_tables, run_rows
from ragrepro.report.compare import compare_runs
from ragrepro.report.dashboard import _run_payload, runs_table
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.runs import load_runs
from ragrepro.report.tables import build_all
from ralm import table1
from tests.report import table_fixtures as fx
from tests.report.demo import filco, make_run

DIAG_BAD = {"gen_answer_length": 1.0, "gen_answer_empty": 0.25, "gen_answer_eos": 0.0}
DIAG_OK = {"gen_answer_length": 0.0, "gen_answer_empty": 0.0, "gen_answer_eos": 1.0}


def _qa_tree(root: Path) -> list:
    make_run(root, "filco/table5", "full5", filco("full", 5), {"em_filco_code": 0.40})
    make_run(root, "filco/table5", "filco5", filco("filco", 5),
             {"em_filco_code": 0.52, **DIAG_BAD, "diag_ctx_empty": 0.3})
    make_run(root, "filco/fig4", "filco1", filco("filco", 1), {"em_filco_code": 0.35, **DIAG_OK})
    return load_runs(root)


def test_paper_table_rows_name_their_flags(tmp_path: Path) -> None:
    root = tmp_path / "results"
    _qa_tree(root)
    built = {t.name: t for t in build_all(root, names=["filco/table5", "filco/fig4"])}
    t5 = built["filco/table5"]
    by_run = {r.run_id: r for r in t5.rows if r.run_id}
    assert by_run["filco5"].flags == "length 100%; empty 25%; ctx_empty 30%"
    assert by_run["full5"].flags is None  # no diagnostics recorded: no cell text at all
    md = t5.paths["md"].read_text(encoding="utf-8")
    head = next(ln for ln in md.splitlines() if ln.startswith("| Paper cell"))
    assert head.split(" | ")[:4] == ["| Paper cell", "Ours [95% CI]", "n", "Flags"]
    line = next(ln for ln in md.splitlines() if "filco/table5/filco5" in ln)
    assert line.split(" | ")[3] == "length 100%; empty 25%; ctx_empty 30%"
    assert "Flags" in t5.paths["html"].read_text(encoding="utf-8")


def test_a_table_without_diagnostics_has_no_flags_column(results: Path) -> None:
    (t1,) = build_all(results, names=["ralm/table1"])
    assert "Flags" not in t1.paths["md"].read_text(encoding="utf-8")


def test_runs_layout_table_gets_a_flags_column_only_with_diagnostics() -> None:
    spec = load_result_spec("riches/main")
    rows = [{"riches_method": m, "f1_squad": f, "n": "2", "model": "m", "dataset": "d",
             **extra} for m, f, extra in (("riches", "0.5", {"gen_answer_length": "0.0"}),
                                          ("no_retrieval", "0.1",
                                           {"gen_answer_length": "1.0"}))]
    header, body = run_rows.table_rows(rows, spec)
    col, method = header.index("flags"), header.index("riches_method")
    assert {b[method]: b[col] for b in body} == {"no_retrieval": "length 100%", "riches": ""}
    old = [{k: v for k, v in r.items() if not k.startswith("gen_")} for r in rows]
    assert "flags" not in run_rows.table_rows(old, spec)[0]


def test_gain_table_shows_flags_and_renders_the_same_from_its_csv(tmp_path: Path) -> None:
    root = tmp_path / "results"
    fx.ralm_runs(root)
    p = root / "ralm/table1/b/metrics.json"
    data = json.loads(p.read_text())
    data["metrics"].update(gen_answer_truncated=0.5)
    p.write_text(json.dumps(data))
    csv_path, md = results_tables.build("ralm/table1", root)
    text = md.read_text(encoding="utf-8")
    head = next(ln for ln in text.splitlines() if ln.startswith("| Model"))
    assert "| n (blocks; tokens) | Flags |" in head
    flagged = [ln for ln in text.splitlines() if "truncated 50%" in ln]
    assert len(flagged) == 1 and flagged[0].startswith("| smollm2-135m | bm25 | - |")
    again = table1.render_gain_summary(load_result_spec("ralm/table1"),
                                               "ralm/table1", csv_path)
    assert again == text


def test_compare_lists_each_runs_flags(tmp_path: Path) -> None:
    runs = {r.run_id: r for r in _qa_tree(tmp_path / "results")}
    out = compare_runs([runs["filco5"], runs["filco1"], runs["full5"]])
    block = out.split("Flags (")[1].split("Settings that differ:")[0]
    assert block.splitlines()[1:4] == ["  [1] length 100%; empty 25%; ctx_empty 30%",
                                       "  [2] (none)", "  [3] (no diagnostics)"]
    assert "Flags (" not in compare_runs([runs["full5"], runs["full5"]])


def test_dashboard_runs_table_has_flags_and_links_to_samples(tmp_path: Path) -> None:
    root = tmp_path / "results"
    runs = _qa_tree(root)
    payload = [_run_payload(r, root, root) for r in runs]
    html = runs_table(runs, payload)
    assert '<th data-type="text" data-col="flags">flags</th>' in html
    assert ('<td class="flags" data-sort="length 100%; empty 25%; ctx_empty 30%">'
            'length 100%; empty 25%; ctx_empty 30%</td>') in html
    assert ('<a href="filco/table5/filco5/samples.jsonl" title="ragrepro samples '
            'filco/table5 --run filco5">samples</a>') in html


def test_pivot_table_names_the_flagged_pivoted_run(tmp_path: Path) -> None:
    root = tmp_path / "results"
    fx.filco_runs(root)
    path = root / "filco" / "fig4.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:  # the smollm2 FilCo run had 50% empty contexts, every other run none
        bad = r["generator"] == "smollm2-135m" and r["setting"] == "filco"
        r["diag_ctx_empty"] = "0.5" if bad else "0.0"
    fx._write_csv(path, rows)
    md, out_csv = results_tables.build("filco/fig4", root)
    lines = md.read_text(encoding="utf-8").splitlines()
    head = next(ln for ln in lines if ln.startswith("|") and "flags" in ln)
    col = [c.strip() for c in head.strip("|").split("|")].index("flags")
    start = lines.index(head) + 2
    body = lines[start:lines.index("", start)]
    cells = {ln.split("|")[1].strip(): ln.strip("|").split("|")[col].strip() for ln in body}
    assert cells["smollm2-135m"] == "filco: ctx_empty 50%"
    assert cells["llama2-7b"] == "" and cells["flan-t5-xl"] == ""
    assert "flags" in out_csv.read_text(encoding="utf-8").splitlines()[0]


def test_pivot_flags_follow_the_column_order_whatever_order_the_runs_are_read_in() -> None:
    """A line's flags cell names its flagged runs in the order of the table's columns: the
    runs of a committed table read from folders and from an evidence bundle come in different
    orders, and the rebuilt table must be the same bytes."""
    from filco.pivot import _group

    spec = {"pivot": "setting", "rows": ["generator"], "values": ["full", "filco", "silver"]}
    rows = [{"generator": "g", "setting": s} for s in ("silver", "other", "filco", "full")]
    for order in (rows, rows[::-1]):
        assert list(_group(order, spec, ("g",))) == ["full", "filco", "silver", "other"]
