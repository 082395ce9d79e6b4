"""Table builders: our numbers pivoted by setting, FilCo − Full, paper numbers beside."""
from __future__ import annotations

import csv

from filco.tables import build


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_fig4_table_pivots_and_adds_paper_delta(tmp_path):
    # score (SQuAD) differs from score_code (eval.py): the paper's numbers are eval.py's,
    # so the table must show score_code beside them
    rows = [{"run_id": s, "generator": "llama2-7b", "family": "causal", "k": "1",
             "eval_dataset": "nq-open", "setting": s, "n_eval": "10", "score": "99",
             "score_code": v}
            for s, v in [("full", "40.0"), ("psg", "41.0"), ("filco", "45.5"), ("silver", "50")]]
    _write(tmp_path / "filco" / "fig4.csv", rows)
    out = build("fig4", root=tmp_path)
    text = out.read_text()
    # the 12 columns are two readable tables, each starting with the 4 row labels
    parts = [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines()
             if ln.startswith("| llama2-7b")]
    cells = parts[0] + [c for p in parts[1:] for c in p[4:]]
    # CSV rows without run folders: no per-sample records, said in the cell
    assert cells[5:9] == ["40.0 (no CI)", "41.0 (no CI)", "45.5 (no CI)", "50.0 (no CI)"]
    assert cells[9] == "5.5 (no CI)"   # FilCo − Full, ours
    assert cells[10] == "8.6"          # paper, Llama 2, NQ
    assert (tmp_path / "filco" / "fig4_table.csv").exists()
    assert "Mini scale" in text and "eval.py" in text


def test_paper_scale_tables_do_not_say_mini(tmp_path):
    rows = [{"run_id": s, "generator": "flan-t5-xl", "family": "seq2seq", "k": "5",
             "eval_dataset": "hotpotqa", "setting": s, "n_eval": "5600", "score": "10",
             "score_code": v} for s, v in [("full", "61.0"), ("filco", "64.0")]]
    _write(tmp_path / "filco" / "paper" / "table5.csv", rows)
    text = build("table5", root=tmp_path, prefix="filco/paper").read_text()
    assert "Mini scale" not in text and "Paper scale" in text
    line = next(l for l in text.splitlines() if l.startswith("| flan-t5-xl"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    # character F1 (score_code), not score; no run folders, so no CI
    assert cells[5] == "61.0 (no CI)" and cells[7] == "64.0 (no CI)"


def test_table4_by_measure(tmp_path):
    rows = [{"run_id": m, "generator": "flan-t5-xl", "eval_dataset": "fever", "measure": m,
             "score": "1", "score_code": str(v), "silver_empty_train": "0.5"}
            for m, v in [("strinc", 80), ("lexical", 85), ("cxmi", 90)]]
    _write(tmp_path / "filco" / "table4.csv", rows)
    text = build("table4", root=tmp_path).read_text()
    assert ("| flan-t5-xl | fever | 80.0 (no CI) | 85.0 (no CI) | 90.0 (no CI) | 50/50/50 | "
            "80.9 | 86.4 | 95.8 |") in text


def _run(root, exp, run_id, setting, scores):
    """A finished FilCo run: CSV row, metrics.json and per-question records."""
    import json

    d = root / "filco" / exp / run_id
    d.mkdir(parents=True)
    (d / "samples.jsonl").write_text("".join(
        json.dumps({"qid": f"q{i}", "setting": setting, "score": v, "score_code": v}) + "\n"
        for i, v in enumerate(scores)))
    score = 100 * sum(scores) / len(scores)
    settings = {"generator": "smollm2-135m", "family": "causal", "k": 1,
                "eval_dataset": "vital-qa", "setting": setting, "n_eval": len(scores)}
    (d / "metrics.json").write_text(json.dumps({"metrics": {"score": score, "score_code": score},
                                                "settings": settings}))
    return {"run_id": run_id, **{k: str(v) for k, v in settings.items()}, "score": str(score),
            "score_code": str(score)}


def test_cells_carry_ci_and_filco_minus_full_the_paired_test(tmp_path):
    import pytest

    full = _run(tmp_path, "fig4", "full1", "full", [0, 0, 0, 1])
    fil = _run(tmp_path, "fig4", "filco1", "filco", [1, 1, 1, 1])
    _write(tmp_path / "filco" / "fig4.csv", [full, fil])
    text = build("fig4", root=tmp_path).read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("| smollm2-135m"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[5].startswith("25.0 [0.0, ") and cells[7] == "100.0 [100.0, 100.0]"
    # +75 points; the paired differences are (1, 1, 1, 0): exact permutation p = 4/16
    assert cells[9].startswith("75.0 [") and cells[9].endswith("p=0.25 borderline")
    assert "percentile bootstrap over the evaluated questions" in text
    with pytest.raises(Exception, match="differ in n_eval"):
        other = _run(tmp_path, "fig4", "filco2", "filco", [1, 1])
        _write(tmp_path / "filco" / "fig4.csv", [full, fil, other])
        build("fig4", root=tmp_path)
