"""benchmarks/table1_memo.py: the memo-on and memo-off sweeps of one machine compared cell by
cell (outputs bit for bit, seconds from each run's stage timings)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import table1_memo
from ragrepro.errors import DataError

XEON = {"cpu": "Xeon (avx512f)", "torch_threads": 2}


def _run(root: Path, run_id: str, rerank: str, nll: float, seconds: dict[str, float],
         machine: dict | None = None) -> None:
    d = root / run_id
    d.mkdir(parents=True)
    (d / "metrics.json").write_text(json.dumps({
        "metrics": {"nll_sum": nll, "n_windows": 2},
        "settings": {"model": "smollm2-135m", "rerank": rerank},
        "metadata": {"machine": machine or XEON}, "timings_s": seconds}), encoding="utf-8")
    (d / "samples.jsonl").write_text(
        "".join(json.dumps({"window": w, "nll_sum": nll / 2, "doc": "d"}) + "\n"
                for w in range(2)), encoding="utf-8")


@pytest.fixture
def sides(tmp_path) -> tuple[Path, Path]:
    memo, plain = tmp_path / "memo", tmp_path / "plain"
    _run(plain, "aaa", "oracle", 3.25, {"build": 2.0, "evaluate": 40.0})
    _run(memo, "aaa", "oracle", 3.25, {"build": 2.0, "evaluate": 1.5})
    _run(plain, "bbb", "zeroshot", 7.5, {"evaluate": 50.0})
    _run(memo, "bbb", "zeroshot", 7.5, {"evaluate": 49.0})
    return memo, plain


def test_the_same_outputs_are_same_bits_and_the_seconds_add_the_stages(sides, tmp_path):
    memo, plain = sides
    cells = table1_memo.compare(memo, plain)
    assert [(c.rerank, c.plain_s, c.memo_s, c.status) for c in cells] == [
        ("zeroshot", 50.0, 49.0, "same bits"), ("oracle", 42.0, 3.5, "same bits")]
    assert cells[0].numbers == 3  # floats: nll_sum and two windows' (integers are values)
    out = tmp_path / "t.md"
    assert table1_memo.main(["--memo", str(memo), "--plain", str(plain), "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "| smollm2-135m | oracle | 42 | 4 | same bits | 3 |" in text
    # 92 s = 1.5 min without the memo, 52.5 s = 0.9 min with it
    assert "2 of 2 cells give the same bits with and without the memo; the cells took 1.5 min " \
           "without it and 0.9 min with it." in text
    assert (tmp_path / "t.csv").read_text(encoding="utf-8").startswith("run_id,model,rerank,")


def test_one_differing_bit_is_named_and_fails(sides, tmp_path):
    memo, plain = sides
    shutil.rmtree(memo / "aaa")
    _run(memo, "aaa", "oracle", 3.2500000000000004, {"evaluate": 1.0})  # one ulp away
    cells = {c.run_id: c for c in table1_memo.compare(memo, plain)}
    assert cells["aaa"].status == "numbers beyond noise" and cells["bbb"].status == "same bits"
    assert table1_memo.main(["--memo", str(memo), "--plain", str(plain),
                             "--out", str(tmp_path / "t.md")]) == 1


def test_other_cells_or_another_cpu_are_refused(sides):
    memo, plain = sides
    _run(plain, "ccc", "gold", 1.0, {"evaluate": 1.0})
    with pytest.raises(DataError, match=r"only without: \['ccc'\]"):
        table1_memo.compare(memo, plain)
    _run(memo, "ccc", "gold", 1.0, {"evaluate": 1.0}, machine={"cpu": "AMD EPYC"})
    with pytest.raises(DataError, match="ccc: made on Xeon .* and on AMD EPYC with it"):
        table1_memo.compare(memo, plain)
