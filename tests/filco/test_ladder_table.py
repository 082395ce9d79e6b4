"""The FilCo ladder table (conf/report/tables/filco/fig4_ladder.yaml) shows each fallback
switch beside the released code's default, labelled as a switch, with the context
diagnostics of the FilCo columns, built from a hand-made results tree."""
from __future__ import annotations

from pathlib import Path

from ragrepro.report import results_tables
from tests.report.table_fixtures import _filco_dir, _write_csv

TOP1 = "filco [switch fallback.test=top1]"
DROP = "filco [switch fallback.ctx_target=drop]"
# variant -> (per-question score_code, diag_ctx_empty, diag_ctx_has_answer)
RUNS = {"full": ([1, 1, 0, 0], None, None), "psg": ([1, 0, 0, 0], None, None),
        "filco": ([0, 0, 0, 0], 0.75, 0.25), TOP1: ([1, 0, 0, 0], 0.75, 0.25),
        DROP: ([1, 1, 0, 0], 0.25, 0.5), "silver": ([1, 1, 1, 0], 0.0, 1.0)}


def _ladder_tree(root: Path) -> None:
    rows = []
    for i, (variant, (scores, empty, has)) in enumerate(RUNS.items()):
        s = {"generator": "qwen2.5-coder-0.5b", "family": "causal", "k": 1,
             "eval_dataset": "vital-qa", "setting": variant.split()[0], "variant": variant,
             "n_eval": 4}
        row = _filco_dir(root / "filco" / "fig4_ladder" / f"run{i}", s, {"score_code": scores})
        if empty is not None:
            row.update(diag_ctx_empty=str(empty), diag_ctx_has_answer=str(has))
        rows.append(row)
    _write_csv(root / "filco" / "fig4_ladder.csv", rows)


def test_switch_columns_sit_beside_the_default_with_the_context_diagnostics(tmp_path):
    _ladder_tree(tmp_path)
    md, _ = results_tables.build("filco/fig4_ladder", tmp_path)
    lines = [x for x in md.read_text(encoding="utf-8").splitlines() if x.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    row = dict(zip(header, (c.strip() for c in lines[1].strip("|").split("|"))))
    cols = header[header.index("full"):header.index("silver") + 1]
    assert cols == ["full", "psg", "filco", TOP1, DROP, "silver"]
    # x100 means of the per-question scores, each with its CI
    assert [row[c].split()[0] for c in cols] == ["50.0", "25.0", "0.0", "25.0", "50.0", "75.0"]
    empty = next(h for h in header if h.startswith("ctx empty %"))
    has = next(h for h in header if h.startswith("ctx has answer %"))
    assert row[empty] == "75 / 75 / 25"
    assert row[has] == "25 / 25 / 50 / 100"
    assert row["FilCo−Full"].startswith("-50.0")       # the default FilCo against Full
