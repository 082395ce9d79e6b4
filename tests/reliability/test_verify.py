"""`ragrepro verify`: a rebuilt table against the committed one, cell by cell (issue 28)."""
import subprocess

import pytest

from ragrepro import verify
from ragrepro.errors import RagreproError

COMMITTED = """# T

Code version: git:abc.

| Model | PPL [95% CI] | Gain | p | Verdict |
|---|---|---|---|---|
| smollm2 | 36.10 [26.71, 48.75] | +0.5% [-3.9, +3.9] | 0.938 | no |
| gemma3 | 37.68 [27.52, 49.01] | (baseline) |  | no |

| a | b |
|---|---|
| x | 1 |
"""


def test_numbers_keep_their_printed_precision():
    assert verify.numbers("36.10 [26.71, 48.75]") == ("# [#, #]",
                                                      [(36.1, 2), (26.71, 2), (48.75, 2)])
    assert verify.numbers("+0.5% [-3.9, +3.9]") == ("#% [#, #]", [(0.5, 1), (-3.9, 1), (3.9, 1)])
    assert verify.numbers("9; 1167") == ("#; #", [(9.0, 0), (1167.0, 0)])


@pytest.mark.parametrize("committed, ours, status", [
    ("36.10 [26.71, 48.75]", "36.10 [26.71, 48.75]", "same"),
    ("36.10 [26.71, 48.75]", "36.11 [26.70, 48.75]", "within"),    # one unit of the last digit
    ("0.938", "0.930", "within"),                                   # 0.85% < 1%
    ("0.016", "0.008", "differs"),                                  # 50%, 8 units
    ("36.10 [26.71, 48.75]", "36.10 [26.71]", "differs"),           # another shape
    ("**yes**", "no (CI includes 0)", "differs"),
    ("reproduced", "reproduced", "same"),
])
def test_compare_cell(committed, ours, status):
    assert verify.compare_cell(committed, ours)[0] == status


def test_compare_cell_states_the_difference():
    status, detail = verify.compare_cell("0.938", "0.930")
    assert status == "within"
    assert detail == "differs by 0.85% (0.930 vs committed 0.938; within tolerance)"
    assert verify.compare_cell("0.938", "0.930", rtol=0.001)[0] == "differs"


def test_compare_tables_every_cell_with_its_row_label():
    ours = COMMITTED.replace("0.938", "0.930").replace("Code version: git:abc.", "Code: x")
    cells = verify.compare_tables(COMMITTED, ours)
    assert len(cells) == 2 * 5 + 1 * 2
    changed = [c for c in cells if c.status != "same"]
    assert [(c.table, c.row, c.column, c.label, c.status) for c in changed] == [
        (1, 1, "p", "smollm2", "within")]


def test_a_missing_row_or_new_column_is_named():
    fewer = COMMITTED.replace("| gemma3 | 37.68 [27.52, 49.01] | (baseline) |  | no |\n", "")
    assert [c.detail for c in verify.compare_tables(COMMITTED, fewer)
            if c.status == "differs"] == ["1 rows vs 2 committed"]
    wider = COMMITTED.replace("| a | b |\n|---|---|\n| x | 1 |",
                              "| a | b | c |\n|---|---|---|\n| x | 1 | 2 |")
    assert [c.column for c in verify.compare_tables(COMMITTED, wider)
            if c.status == "differs"] == ["header"]


def _repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "t.md").write_text(COMMITTED)
    subprocess.run(["git", "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t", "-c", "user.name=t",
                    "commit", "-q", "-m", "c"], check=True)
    return tmp_path


def test_report_against_the_committed_file(tmp_path):
    root = _repo(tmp_path)
    text, bad = verify.report(["results/t.md"], root=root)
    assert bad == 0 and text.count(": same as committed") == 12
    assert "12 cells same as committed, 0 within tolerance, 0 differ" in text
    (root / "results" / "t.md").write_text(COMMITTED.replace("0.938", "0.500"))
    text, bad = verify.report(["results/t.md"], root=root)
    assert bad == 1
    assert "table 1 row 1 (smollm2) p: differs by 46.70% (0.500 vs committed 0.938; " \
           "outside tolerance)" in text
    assert text.rstrip().endswith("11 cells same as committed, 0 within tolerance, 1 differ "
                                  "(tolerance: one unit of the last printed digit or 1% of "
                                  "the committed value)")


def test_untracked_or_absent_tables_are_refused_with_the_fix(tmp_path):
    root = _repo(tmp_path)
    with pytest.raises(RagreproError, match="not committed at HEAD"):
        verify.report(["results/nope.md"], root=root)
    (root / "results" / "t.md").unlink()
    with pytest.raises(RagreproError, match="make reproduce-table1"):
        verify.report(["results/t.md"], root=root)
