"""The FilCo ladder table (filco/conf/report/tables/filco/fig4_ladder.yaml) shows each fallback
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


def _tables(text: str) -> list[list[list[str]]]:
    """Each Markdown table of `text` as its rows of cells (header first, the rule left out)."""
    tables: list[list[list[str]]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(line.replace("|", "").strip()) <= {"-"}:
            continue
        starts = i + 1 < len(lines) and set(lines[i + 1].replace("|", "").strip()) == {"-"}
        if starts:
            tables.append([cells])
        else:
            tables[-1].append(cells)
    return tables


def test_switch_columns_sit_beside_the_default_with_the_context_diagnostics(tmp_path):
    _ladder_tree(tmp_path)
    md, _ = results_tables.build("filco/fig4_ladder", tmp_path)
    # the ladder table is split into readable parts of at most ten columns, each repeating the
    # row labels (ragrepro/report/readable.py): read the first row of the first two parts
    header, row = [], {}
    for part in _tables(md.read_text(encoding="utf-8"))[:2]:
        header += [h for h in part[0] if h not in header]
        row.update(zip(part[0], part[1]))
    cols = header[header.index("full"):header.index("silver") + 1]
    assert cols == ["full", "psg", "filco", TOP1, DROP, "silver"]
    # x100 means of the per-question scores, each with its CI
    assert [row[c].split()[0] for c in cols] == ["50.0", "25.0", "0.0", "25.0", "50.0", "75.0"]
    empty = next(h for h in header if h.startswith("ctx empty %"))
    has = next(h for h in header if h.startswith("ctx has answer %"))
    assert row[empty] == "75 / 75 / 25"
    assert row[has] == "25 / 25 / 50 / 100"
    assert row["FilCo−Full"].startswith("-50.0")       # the default FilCo against Full
