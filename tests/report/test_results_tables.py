"""One builder for every method's results table: the tables it writes are byte-identical to
the ones the per-method builders wrote (tests/report/golden/, written by the old builders
from the runs of tests/report/table_fixtures.py), and the committed ladder table is
regenerated from its committed summary CSV. Since the unification the summary CSV also
carries `wall_s`, and RICHES tables the judge accuracy column and its note (the goldens
were regenerated for those, nothing else changed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from filco.pivot import shown_path
from ragrepro.errors import ConfigError
from ragrepro.paths import REPO_ROOT
from ragrepro.report import results_tables, run_rows
from ragrepro.report.result_specs import load_result_spec, result_spec_names
from ragrepro.report.spec import SPEC_DIR
from ralm import table1
from ralm.gain_render import time_line
from tests.report import table_fixtures as fx

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("results")
    fx.ralm_runs(r)
    fx.ralm_stride_runs(r)
    fx.riches_runs(r)
    fx.filco_runs(r)
    return r


def _written(path: Path, root: Path) -> str:
    """A file the builder wrote, with the temporary results folder named <root>."""
    return path.read_text(encoding="utf-8").replace(str(root), "<root>")


def _golden(name: str) -> str:
    return (GOLDEN / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("experiment", ["ralm/table1", "ralm/table1_strides"])
def test_ralm_table1_is_byte_identical(root: Path, experiment: str) -> None:
    csv_path, md = results_tables.build("ralm/table1", root, experiment=experiment)
    stem = experiment.replace("/", "_")
    assert _written(md, root) == _golden(f"{stem}.md")
    assert _written(csv_path, root) == _golden(f"{stem}_summary.csv")


def test_ralm_table1_renders_from_its_summary_csv_alone(root: Path) -> None:
    spec = load_result_spec("ralm/table1")
    text = table1.render_gain_summary(spec, "ralm/table1",
                                              GOLDEN / "ralm_table1_summary.csv")
    assert text == (GOLDEN / "ralm_table1.md").read_text(encoding="utf-8")


def test_committed_ladder_table_is_regenerated_from_its_committed_csv() -> None:
    ladder = REPO_ROOT / "results" / "ladder"
    text = table1.render_gain_summary(load_result_spec("ralm/table1"),
                                              "ralm/table1_ladder",
                                              ladder / "table1_ladder_summary.csv")
    assert text == (ladder / "table1_ladder.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("table", ["riches/main", "riches/keys"])
def test_riches_tables_are_byte_identical(root: Path, table: str) -> None:
    md, csv_path = results_tables.build(table, root)
    stem = table.replace("/", "_")
    assert _written(md, root) == _golden(f"{stem}_table.md")
    assert _written(csv_path, root) == _golden(f"{stem}_table.csv")


@pytest.mark.parametrize("table", ["fig4", "table5", "table3", "fig6", "table4", "table2"])
def test_filco_tables_are_byte_identical(root: Path, table: str) -> None:
    md, csv_path = results_tables.build(f"filco/{table}", root)
    assert _written(md, root) == _golden(f"filco_{table}_table.md")
    assert _written(csv_path, root) == _golden(f"filco_{table}_table.csv")


def test_ragrepro_table_method_builds_a_results_table(root: Path) -> None:
    (root / "riches" / "keys_table.md").unlink(missing_ok=True)
    results_tables.main(["--method", "riches/keys", "--results", str(root)])
    assert _written(root / "riches" / "keys_table.md", root) == _golden("riches_keys_table.md")


def test_ragrepro_table_builds_both_parts_of_one_spec(root: Path) -> None:
    """One command, one spec: `ragrepro table filco/table5` writes the FilCo results table
    next to the runs (byte-identical to the golden) and the paper grid under report/."""
    for path in (root / "filco" / "table5_table.md", root / "report" / "filco" / "table5.md"):
        path.unlink(missing_ok=True)
    results_tables.main(["filco/table5", "--results", str(root)])
    assert _written(root / "filco" / "table5_table.md", root) == \
        _golden("filco_table5_table.md")
    grid = (root / "report" / "filco" / "table5.md").read_text(encoding="utf-8")
    assert grid.startswith("# FilCo, Table 5")


def test_ragrepro_table_refuses_an_unknown_name(root: Path) -> None:
    with pytest.raises(ConfigError, match=r"No table \['ralm/nope'\].*Known tables: .*ralm/table1"):
        results_tables.main(["ralm/nope", "--results", str(root)])


def test_a_results_table_is_one_yaml(tmp_path: Path) -> None:
    """A new table needs only its YAML: a RICHES-style table over another `by` column, from
    a spec folder of its own; an unknown field is refused."""

    demo = tmp_path / "tables" / "demo"
    demo.mkdir(parents=True)
    (demo / "_defaults.yaml").write_text(
        "results:\n  layout: runs\n  title: 'Demo {table}'\n  metrics: [f1_squad, n]\n"
        "  ci_metrics: [f1_squad]\n  context: [model, dataset, limit]\n")
    (demo / "temps.yaml").write_text("results:\n  by: [temperature]\n")
    spec = load_result_spec("demo/temps", tmp_path)
    rows = [{"temperature": t, "f1_squad": f, "n": "2", "model": "m", "dataset": "d"}
            for t, f in (("1.0", "0.25"), ("0.5", "0.5"))]
    header, body = run_rows.table_rows(rows, spec)
    assert header == ["temperature", "f1_squad", "n", "model", "dataset", "limit"]
    assert body == [["0.500", "0.500 (no CI)", "2", "m", "d", ""],
                    ["1", "0.250 (no CI)", "2", "m", "d", ""]]
    (demo / "bad.yaml").write_text("results:\n  by: [x]\n  sort: [x]\n")
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['sort'\]"):
        load_result_spec("demo/bad", tmp_path)


def test_every_results_spec_loads() -> None:
    """The shipped specs (conf/report/ and the built-in methods' <method>/conf/report/)
    exactly; every spec on the search path, an installed plug-in's too
    (tests/core/test_plugin_papercuts.py runs this with one), loads."""
    shipped = result_spec_names([SPEC_DIR, *(REPO_ROOT / m / "conf" / "report"
                                             for m in ("ralm", "riches", "filco"))])
    assert result_spec_names(SPEC_DIR) == []  # every results table is a method's
    assert {"ralm/table1", "riches/main", "riches/keys", "riches/beam", "riches/interleave",
            "filco/fig4", "filco/table2", "filco/table3", "filco/table4", "filco/table5",
            "filco/fig6", "riches/main_ladder", "filco/fig4_ladder", "ralm/fig8"} == set(shipped)
    assert {load_result_spec(n)["layout"] for n in shipped} == {"ralm.table1", "runs",
                                                                 "filco.tables"}
    everywhere = result_spec_names()
    assert set(shipped) <= set(everywhere)
    assert all(load_result_spec(n)["name"] == n for n in everywhere)


def test_time_line_sums_the_stage_timings() -> None:
    rows = [{"model": "m", "rerank": "none", "wall_s": 30.0},
            {"model": "m", "rerank": "first", "wall_s": 90.4}]
    assert time_line(rows, "rerank") == ("Time per cell (s, sum of the run's stage timings): "
                                         "m none 30; m first 90; total 2.0 min.")


def test_committed_tables_name_their_source_relative_to_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "results" / "filco" / "fig4.csv") == "results/filco/fig4.csv"
    outside = tmp_path.parent / "elsewhere" / "fig4.csv"
    assert shown_path(outside) == str(outside)


def test_note_states_the_settings_a_table_leaves_out() -> None:
    from ragrepro.report.run_rows import shared_settings_note
    rows = [{"model": "m", "judge": "j", "k": "1"}, {"model": "m", "judge": "", "k": "4"}]
    assert shared_settings_note(rows, ["model", "judge", "k", "absent"]) == (
        "Settings not shown as columns (all in the CSV): model = m; judge = j (1 of 2 rows; "
        "the others have none); k varies by row (1, 4).")
    assert shared_settings_note(rows, []) == ""
