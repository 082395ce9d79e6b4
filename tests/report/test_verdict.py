"""The reproduction verdict (ragrepro.report.verdict): the equivalence rule on hand-computed
intervals (inside, outside, touching the band, straddling it, no CI, no paper number), the
generic settings comparison, the margins file, and the verdict column of the tables."""
from __future__ import annotations

from pathlib import Path

import pytest

from filco.pivot_paper import pivot_verdict, verdict_cells
from ragrepro.errors import ConfigError
from ragrepro.report import verdict as v
from ragrepro.report.paper import PaperNumber, lookup, paper_table, table_recorded
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.runs import load_runs
from ragrepro.report.spec import load_metric_infos, load_table_specs
from ragrepro.report.tables import build_table
from ralm.gain_render import row_verdicts
from ralm.table1 import read_gain_summary
from tests.report.demo import make_run, ralm

PPL = v.Margin("relative", 0.05)     # paper 20.0 -> band [19.0, 21.0]
EM = v.Margin("absolute", 3.0)       # paper 28.0 -> band [25.0, 31.0]
GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("low,high,status", [
    (19.5, 20.5, v.REPRODUCED),          # well inside
    (19.0, 21.0, v.REPRODUCED),          # touching both ends counts as inside
    (19.0, 20.0, v.REPRODUCED),          # touching the lower end
    (21.5, 23.0, v.DIFFERS),             # wholly above
    (15.0, 18.9, v.DIFFERS),             # wholly below
    (21.0, 22.0, v.INCONCLUSIVE),        # touching the upper end from outside: not outside
    (18.0, 19.0, v.INCONCLUSIVE),        # touching the lower end from outside
    (20.5, 21.5, v.INCONCLUSIVE),        # straddles the upper end
    (18.0, 22.0, v.INCONCLUSIVE),        # wider than the band
])
def test_relative_margin_on_hand_computed_intervals(low, high, status):
    assert v.equivalence(low, high, 20.0, PPL).status == status


@pytest.mark.parametrize("low,high,status", [
    (25.0, 31.0, v.REPRODUCED), (26.2, 29.9, v.REPRODUCED), (31.5, 34.0, v.DIFFERS),
    (20.0, 24.99, v.DIFFERS), (24.0, 27.0, v.INCONCLUSIVE), (30.0, 32.0, v.INCONCLUSIVE),
])
def test_absolute_margin_in_points(low, high, status):
    assert v.equivalence(low, high, 28.0, EM).status == status


def test_touching_survives_float_rounding_of_the_margin():
    # 26.8 * 0.05 = 1.34: the band is [25.46, 28.14], whose floats are not exact
    lo, hi = PPL.bounds(26.8)
    assert (lo, hi) == pytest.approx((25.46, 28.14))
    assert v.equivalence(25.46, 28.14, 26.8, PPL).status == v.REPRODUCED
    assert v.equivalence(28.14, 29.0, 26.8, PPL).status == v.INCONCLUSIVE


def test_missing_ci_paper_number_or_margin():
    assert v.equivalence(None, None, 20.0, PPL) == v.Verdict(v.INCONCLUSIVE, "no CI")
    assert v.equivalence(19.5, None, 20.0, PPL).text == "inconclusive: no CI"
    assert v.equivalence(float("nan"), 20.0, 20.0, PPL).status == v.INCONCLUSIVE
    assert v.equivalence(19.5, 20.5, None, PPL).status == v.NO_PAPER_NUMBER
    assert v.equivalence(19.5, 20.5, 20.0, None).status == v.NO_MARGIN
    with pytest.raises(ValueError):
        v.equivalence(21.0, 19.0, 20.0, PPL)


def test_margin_text_and_validation():
    assert PPL.text == "±5% of the paper's value" and EM.text == "±3 points"
    for bad in ({"relative": -0.1}, {"absolute": "x"}, {"percent": 5}, {"relative": 0.1,
                                                                         "absolute": 1}):
        with pytest.raises(ConfigError):
            v.parse_margin("ppl_word", bad)


def test_margins_file_states_one_margin_per_metric():
    margins = v.load_margins()
    assert margins["ppl_word"] == v.Margin("relative", 0.05)
    assert margins["ppl_token"] == v.Margin("relative", 0.05)
    for metric in ("em_squad", "em_filco_code", "f1_char_filco_code", "accuracy"):
        assert margins[metric] == v.Margin("absolute", 3.0)
    line = v.margin_line(["ppl_word", "ppl_word", "unlisted"], margins)
    assert "ppl_word ±5% of the paper's value; rule in docs/statistics.md" in line


def test_same_setting_normalises_numbers_text_and_missing():
    assert v.same_setting("16", 16) and v.same_setting(16.0, 16)
    assert v.same_setting("Test", "test") and v.same_setting(None, None)
    assert v.same_setting("", None) and v.same_setting("None", None)
    assert not v.same_setting(10, None) and not v.same_setting(None, 16)
    assert v.same_setting("nq-open-dpr", ["nq-open", "nq-open-dpr"])
    assert not v.same_setting("nq", ["nq-open", "nq-open-dpr"])
    assert v.same_setting(True, "true") and not v.same_setting(True, 1)  # bools are not 0/1


def test_setting_differences_in_the_records_order():
    expected = {"scale": "paper", "limit": None, "max_length": 1024, "model": "gpt2-small"}
    recorded = {"scale": "mini", "limit": 10, "max_length": 1024, "model": "smollm2-135m"}
    diffs = v.setting_differences(expected, recorded)
    assert [d.text for d in diffs] == ["scale=mini vs paper", "limit=10 vs unset",
                                       "model=smollm2-135m vs gpt2-small"]
    assert v.setting_differences({"k": 16}, {})[0].text == "k=unset vs 16"
    verdict = v.cell_verdict(expected, recorded, 19.5, 20.5, 20.0, PPL)
    assert verdict.text == "not comparable: scale=mini vs paper (+2 more)"
    assert v.not_comparable(diffs, shown=2).detail == (
        "scale=mini vs paper, limit=10 vs unset (+1 more)")
    # every setting the same: the rule decides; no recorded settings: no verdict
    assert v.cell_verdict(expected, expected, 19.5, 20.5, 20.0, PPL).status == v.REPRODUCED
    assert v.cell_verdict({}, recorded, 19.5, 20.5, 20.0, PPL).status == v.NOT_COMPARABLE
    extra = [v.Difference("metric", "em_squad", "em_filco_code")]
    assert v.cell_verdict(expected, expected, 26.0, 27.0, 28.0, EM, extra).text == (
        "not comparable: metric=em_squad vs em_filco_code")


def _cell(model: str, value: float | None) -> PaperNumber:
    return PaperNumber("p", "t", model, "c", value, {"model": model},
                       {"metric": "ppl_word"}, {"scale": "paper", "model": model})


def test_row_verdict_picks_the_cell_of_the_rows_settings():
    cells = [_cell("a", 30.0), _cell("b", 20.0)]
    asked: list[str | None] = []

    def interval(metric: str | None) -> tuple[float, float]:
        asked.append(metric)
        return 19.2, 20.9

    row = {"scale": "paper", "model": "b"}
    assert v.row_verdict(cells, {"scale": "paper"}, row, interval).status == v.REPRODUCED
    assert asked == ["ppl_word"]
    # a model the paper has no cell for: described against the first nearest cell
    got = v.row_verdict(cells, {}, {"scale": "paper", "model": "c"}, interval)
    assert got.text == "not comparable: model=c vs a"
    # no cell at all: the table's shared settings decide between not comparable and none
    assert v.row_verdict([], {"scale": "paper"}, {"scale": "mini"}, interval).text == \
        "not comparable: scale=mini vs paper"
    assert v.row_verdict([], {"scale": "paper"}, row, interval).status == v.NO_PAPER_NUMBER
    # the paper prints "-" in the cell
    assert v.row_verdict([_cell("b", None)], {}, row, interval).status == v.NO_PAPER_NUMBER


def _paper_row(model: str, rerank: str, low: float, high: float, **over: object) -> dict:
    """A gain-table row as gain_rows.rows_of writes it, at the paper's Table 1 settings."""
    settings = {"scale": "paper", "max_length": 1024, "stride": 4, "split": "test",
                "limit": None, "dataset": "wikitext-103", "retrieval_stride": 4,
                "query_len": 32, "doc_max_tokens": 256, "k": 16, "rerank_tokens": 16}
    return {"model": model, "rerank": rerank, "ppl_word_ci_low": low,
            "ppl_word_ci_high": high, **settings, **over}


def test_gain_table_verdicts_at_paper_settings():
    spec = load_result_spec("ralm/table1")
    paper = lookup("ralm", "table1", model="gpt2-medium", retrieval="bm25",
                   rerank="zero-shot", dataset="wikitext-103").value
    assert paper == 20.8                  # band [19.76, 21.84]
    rows = [_paper_row("gpt2-medium", "zeroshot", 19.9, 21.5),
            _paper_row("gpt2-medium", "zeroshot", 22.0, 23.0),
            _paper_row("gpt2-medium", "zeroshot", 21.0, 22.5),
            _paper_row("gpt2-medium", "zeroshot", 19.9, 21.5, query_len=64),
            _paper_row("gpt2-medium", "oracle", 15.0, 16.0),
            _paper_row("gpt2-medium", "none", None, None)]
    assert [x.text for x in row_verdicts(rows, spec)] == [
        "reproduced", "differs", "inconclusive", "not comparable: query_len=64 vs 32",
        "no paper number: no paper cell", "inconclusive: no CI"]


def test_mini_tables_are_not_comparable_everywhere():
    spec = load_result_spec("ralm/table1")
    rows = read_gain_summary(GOLDEN / "ralm_table1_summary.csv")
    verdicts = row_verdicts(rows, spec)
    assert verdicts and all(x.status == v.NOT_COMPARABLE for x in verdicts)
    assert all(x.detail.startswith("scale=unset vs paper") or
               x.detail.startswith("scale=mini vs paper") for x in verdicts)
    assert table_recorded("ralm", "table1")["scale"] == "paper"
    line = v.summary_line(verdicts)
    assert line.startswith(f"Not comparable with the paper ({len(rows)} of {len(rows)} rows)")


def _filco(setting: str, k: int = 5, **over: object) -> dict:
    """A FilCo row's recorded settings (filco.pipeline) at the paper's Table 5 settings."""
    return {"scale": "paper", "generator": "flan-t5-xl", "k": k, "eval_limit": None,
            "eval_dataset": "nq-open", "setting": setting, **over}


def test_pivot_verdict_per_pivoted_value():
    spec = load_result_spec("filco/table5")
    cells = verdict_cells(spec)
    # paper NQ top-5: Full 47.6 -> band [44.6, 50.6]; Psgs 52.9 -> [49.9, 55.9]
    got = pivot_verdict(spec, cells, {"full": _filco("full"), "psg": _filco("psg")},
                        {"full": (45.0, 50.0), "psg": (40.0, 45.0)})
    assert got == "full: reproduced; psg: differs"
    same = pivot_verdict(spec, cells, {"full": _filco("full"), "filco": _filco("filco")},
                         {"full": (45.0, 50.0), "filco": (59.0, 64.0)})  # FilCo 61.8
    assert same == "reproduced"
    # top-1 runs beside the top-5 numbers, and mini rows: named, merged over the values
    assert pivot_verdict(spec, cells, {"full": _filco("full", k=1)}, {"full": (45.0, 50.0)}) \
        == "not comparable: k=1 vs 5"
    mini = pivot_verdict(spec, cells, {s: _filco(s, scale="mini", eval_dataset="vital-qa")
                                       for s in ("full", "psg")}, {})
    assert mini == "not comparable: scale=mini vs paper (+1 more)"


def test_pivot_verdict_of_a_delta_uses_the_paired_interval():
    spec = load_result_spec("filco/fig4")
    cells = verdict_cells(spec)
    row = {"scale": "paper", "generator": "llama2-7b", "k": 1, "eval_limit": None,
           "eval_dataset": "nq-open", "setting": "filco"}
    # paper: FilCo − Full = 8.6 points on NQ for Llama 2 -> band [5.6, 11.6]
    assert pivot_verdict(spec, cells, {"delta": row}, {"delta": (6.0, 11.0)}) == "reproduced"
    assert pivot_verdict(spec, cells, {"delta": row}, {"delta": (-1.0, 4.0)}) == "differs"
    assert pivot_verdict(spec, cells, {"delta": row}, {"delta": (None, None)}) == \
        "inconclusive: no CI"


def test_paper_table_rows_carry_the_verdict(tmp_path: Path):
    """`ragrepro table`: a paper-scale run with every recorded setting of its cell gets the
    rule's answer (no per-sample records here: inconclusive, no CI); one setting off names
    it; the mini demo runs are not comparable."""

    paper = {"scale": "paper", "limit": None, "dataset": "wikitext-103", "retrieval_stride": 4,
             "rerank_tokens": 16, "scorer_model": "gpt2-small"}
    make_run(tmp_path, "ralm/paper/table1", "same", {**ralm("gpt2-small", "bm25", "zeroshot"),
                                                     **paper}, {"ppl_word": 28.5})
    make_run(tmp_path, "ralm/paper/table1", "qlen", {**ralm("gpt2-small", "bm25", "zeroshot"),
                                                     **paper, "query_len": 64},
             {"ppl_word": 28.5})
    make_run(tmp_path, "ralm/table1", "mini", ralm("smollm2-135m", "bm25", "zeroshot"),
             {"ppl_word": 30.0})
    spec = next(s for s in load_table_specs() if s["name"] == "ralm/table1")
    rows = build_table(spec, paper_table("ralm", "table1"), load_runs(tmp_path),
                       load_metric_infos(), table_recorded("ralm", "table1"))
    by_run = {r.run_id: r.verdict for r in rows if r.run_id}
    assert by_run == {"same": "inconclusive: no CI",
                      "qlen": "not comparable: query_len=64 vs 32",
                      "mini": "not comparable: scale=mini vs paper (+5 more)"}
