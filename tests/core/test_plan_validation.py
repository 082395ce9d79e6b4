"""scripts/plan_validation.py: the GNU time parser, ratios and verdicts on fixed inputs."""
import pytest

from scripts import plan_validation as pv

GNU_TIME = """\tCommand being timed: "python -m ragrepro experiment=ralm/table1"
\tUser time (seconds): 56.08
\tSystem time (seconds): 6.26
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:40.95
\tMaximum resident set size (kbytes): 1237560
\tExit status: 0
"""


def test_gnu_time_fields():
    assert pv.parse_clock("1:40.95") == pytest.approx(100.95)
    assert pv.parse_clock("1:02:03.5") == pytest.approx(3723.5)
    got = pv.parse_gnu_time(GNU_TIME)
    assert got == {"user_s": 56.08, "sys_s": 6.26, "wall_s": pytest.approx(100.95),
                   "peak_rss_kb": 1237560.0}


def test_ratio_and_band():
    assert pv.ratio(3.0, 2.0) == 1.5
    assert pv.ratio(None, 2.0) is None and pv.ratio(1.0, 0.0) is None
    assert pv.within(0.5) and pv.within(2.0) and not pv.within(2.01) and not pv.within(0.49)
    assert not pv.within(None)


def test_verdicts():
    assert pv.verdict(1.0, 1.9) == "within 0.5-2x"
    assert pv.verdict(1.0, None, "note") == "within 0.5-2x (note)"
    assert pv.verdict(4.0, 1.0, "HNSW rate set low") == "outside 0.5-2x: HNSW rate set low"
    assert pv.verdict(0.3, 1.0) == "outside 0.5-2x: UNEXPLAINED"  # never silently outside
    assert pv.verdict(None, None, "no GPU") == "not measured: no GPU"


def test_a_row_is_judged_on_its_cpu_time_when_measured():
    # predicted 100 s on a dedicated core; the shared machine gave the cell 25% of one
    row = pv.Row("cell", 100.0, 400.0, 1.0, 1.0, "", measured_cpu_s=90.0)
    assert row.wall_ratio == pytest.approx(0.25) and row.cpu_ratio == pytest.approx(100 / 90)
    assert row.time_ratio == row.cpu_ratio and row.verdict == "within 0.5-2x"
    bundle = pv.Row("cell", 100.0, 400.0, None, None, "")
    assert bundle.time_ratio == pytest.approx(0.25)
    assert bundle.verdict == "outside 0.5-2x: UNEXPLAINED"


def test_csv_and_markdown_rows():
    rows = [pv.Row("a", 10.0, 8.0, 1.0, 2.0, "", source="x"),
            pv.Row("b", 10.0, 40.0, None, None, "slow machine"),
            pv.Row("c", None, None, None, None, "no GPU")]
    (a, b, c) = pv.csv_rows(rows)
    assert (a["wall_ratio"], a["rss_ratio"], a["verdict"]) == ("1.25", "0.5", "within 0.5-2x")
    assert b["verdict"] == "outside 0.5-2x: slow machine" and b["rss_ratio"] == "-"
    assert c["verdict"] == "not measured: no GPU"
    text = pv.markdown(rows, ["# t"])
    assert "1 of 2 measured items within 0.5-2x" in text
    assert text.count("\n| ") == 4  # header row + three items


def test_baselines_are_medians_of_successful_runs():
    rows = [{"item": "imports", "rc": "0", "user_s": u, "sys_s": "0.5", "peak_rss_kb": k}
            for u, k in (("3.0", "1048576"), ("2.0", "2097152"), ("9.0", "1048576"))]
    rows.append({"item": "imports", "rc": "1", "user_s": "0", "sys_s": "0", "peak_rss_kb": "1"})
    got = pv.baselines(rows)["imports"]
    assert got.cpu_s == pytest.approx(3.5) and got.rss_gb == pytest.approx(1.0)


def test_scratch_runs_map_to_items():
    assert pv.item_of({"experiment": "ralm/table1",
                       "settings": {"model": "gemma3-270m", "rerank": "oracle", "limit": 10}}) \
        == "ralm/table1 gemma3-270m oracle"
    assert pv.item_of({"experiment": "ralm/table1",
                       "settings": {"model": "x", "rerank": "first", "limit": 1}}) is None
    assert pv.item_of({"experiment": "riches/main", "settings": {}}) == \
        "riches/main riches hops=1"
    # 12 Table 1 cells, one RICHES, one FilCo cell and part 0 of 2 of a sharded Table 1 cell
    assert len(pv.measured_cells()) == 15
