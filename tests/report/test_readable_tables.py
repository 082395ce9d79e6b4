"""Readable tables (issue 30 item 5): every committed Markdown table and every results-table
spec keeps to at most ten columns; the generators refuse a wider one; what leaves the
Markdown stays in the CSV beside it (and the note names the settings every row shares)."""
from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import device, ralm_throughput, riches_shards
from benchmarks.common import markdown_tables, read_rows
from ragrepro.errors import ConfigError
from ragrepro.paths import REPO_ROOT
from ragrepro.report import results_tables, run_rows
from ragrepro.report.readable import (
    MAX_COLUMNS,
    check_columns,
    markdown_headers,
    readable_markdown,
    split_columns,
)
from ragrepro.report.result_specs import load_result_spec, result_spec_names
from tests.report import table_fixtures as fx

# Committed tables allowed over ten columns (at most twelve), each with its reason.
EXCEPTIONS = {
    "results/rehearsal/plan_ralm_paper_fig4.md":
        "the `ragrepro plan` preflight exactly as the command prints it in a terminal "
        "(ragrepro/plan.py), one column per resource it checks: 11 columns",
}


def _committed_tables() -> list[str]:
    out = subprocess.run(["git", "ls-files", "results/*.md", "results/**/*.md"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(out))


def test_every_committed_table_keeps_to_ten_columns() -> None:
    paths = _committed_tables()
    assert "results/ralm/table1.md" in paths and len(paths) > 20
    wide = {}
    for rel in paths:
        widths = [len(h) for h in markdown_headers((REPO_ROOT / rel).read_text("utf-8"))]
        limit = 12 if rel in EXCEPTIONS else MAX_COLUMNS
        if any(w > limit for w in widths):
            wide[rel] = widths
    assert wide == {}, ("tables over the limit (column counts per table); a table built from "
                        "runs is rebuilt with `ragrepro table <name>`")
    for rel in EXCEPTIONS:  # an exception that is no longer wide is taken off the list
        assert max(len(h) for h in markdown_headers((REPO_ROOT / rel).read_text("utf-8"))) \
            > MAX_COLUMNS, rel


@pytest.mark.parametrize("name", [n for n in result_spec_names()
                                  if load_result_spec(n)["layout"] == "runs"])
def test_every_runs_spec_fits_ten_columns_whatever_its_runs_hold(name: str) -> None:
    """Every metric present, a flags column: the widest table the spec can give."""
    spec = load_result_spec(name)
    assert len(run_rows.widest_header(spec)) <= MAX_COLUMNS, run_rows.widest_header(spec)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("results")
    fx.ralm_runs(r)
    fx.riches_runs(r)
    fx.filco_runs(r)
    return r


@pytest.mark.parametrize("name", ["ralm/table1", "riches/main", "riches/keys", "filco/fig4",
                                  "filco/table2", "filco/table3", "filco/table4",
                                  "filco/table5", "filco/fig6"])
def test_every_built_table_keeps_to_ten_columns(root: Path, name: str) -> None:
    md = next(p for p in results_tables.build(name, root) if p.suffix == ".md")
    widths = [len(h) for h in markdown_headers(md.read_text("utf-8"))]
    assert widths and max(widths) <= MAX_COLUMNS, widths


def test_a_wide_filco_table_is_split_with_its_row_labels_and_the_csv_keeps_it_whole(
        root: Path) -> None:
    md, out_csv = results_tables.build("filco/table5", root)
    text = md.read_text("utf-8")
    heads = markdown_headers(text)
    with open(out_csv, newline="", encoding="utf-8") as f:
        whole = next(csv.reader(f))
    assert len(whole) == 15 and [len(h) for h in heads[:2]] == [10, 9]
    labels = load_result_spec("filco/table5")["row_labels"]
    assert all(h[:len(labels)] == labels for h in heads[:2])
    assert labels + heads[0][len(labels):] + heads[1][len(labels):] == whole


def test_split_columns_by_hand() -> None:
    header = ["a", "b"] + [f"c{i}" for i in range(11)]          # 13 columns, 2 labels
    body = [["x", "y"] + [str(i) for i in range(11)]]
    parts = split_columns(header, body, keep=2)
    assert [h for h, _ in parts] == [["a", "b", *[f"c{i}" for i in range(8)]],
                                     ["a", "b", "c8", "c9", "c10"]]
    assert [b for _, b in parts] == [[["x", "y", *map(str, range(8))]],
                                     [["x", "y", "8", "9", "10"]]]
    assert split_columns(header[:10], [body[0][:10]], keep=2) == [(header[:10], [body[0][:10]])]
    assert readable_markdown(["a", "b"], [["1", "2"]], 1) == "| a | b |\n|---|---|\n| 1 | 2 |"
    with pytest.raises(ConfigError, match="10 row-label columns cannot be split"):
        split_columns(header, body, keep=10)


def test_the_runs_layout_refuses_a_wide_spec_and_names_the_fix(root: Path,
                                                                monkeypatch) -> None:
    spec = {**load_result_spec("riches/main"),
            "context": ["model", "dataset", "limit", "retriever", "k", "n"],
            "metrics": ["f1_squad", "em_squad", "verbatim_rate", "seconds_per_question"]}
    with pytest.raises(ConfigError, match=r"riches/main .* at most 10 columns, this one has "
                                          r"13 .*`note_columns`.*`csv_also`"):
        run_rows.write(spec, root)
    check_columns(["x"] * 10, "ten")  # ten is fine


def test_what_leaves_the_markdown_stays_in_the_csv(root: Path) -> None:
    md, out_csv = results_tables.build("riches/main", root)
    md_head = markdown_headers(md.read_text("utf-8"))[0]
    with open(out_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert md_head == ["dataset_hops", "riches_method", "retriever", "k", "f1_squad",
                       "verbatim_rate", "RICHES − row: f1_squad"]
    assert set(md_head) < set(rows[0])
    # the secondary metrics with their CI, and the settings the note states
    first = next(r for r in rows if r["riches_method"] == "dense_reader"
                 and r["retriever"] == "bm25" and r["dataset_hops"] == "1")
    em, ci = first["em_squad"].split(" ", 1)  # 2 of 5 exact, with its bootstrap CI
    low, high = (float(x) for x in ci.strip("[]").split(", "))
    assert em == "0.400" and 0.0 <= low < 0.4 < high <= 1.0
    assert (first["seconds_per_question"], first["n"]) == ("2.500", "5")
    assert first["model"] == "m" and first["keys_articles"] == ""
    note = md.read_text("utf-8").split("\n\n")[1]
    assert "n = 5; model = m; dataset = d; limit = 5; keys_articles = sample (2 of 8 rows; " \
           "the others have none)" in note


def test_committed_benchmark_pages_are_rewritten_from_their_csv(tmp_path: Path) -> None:
    bench = REPO_ROOT / "results" / "bench"
    riches_shards.write_markdown(read_rows(bench / "riches_shards.csv"), tmp_path)
    assert (tmp_path / "riches_shards.md").read_text() == (bench / "riches_shards.md").read_text()
    page = tmp_path / "device_cpu-amd-epyc_tiny.md"
    shutil.copy(bench / page.name, page)
    shutil.copy(bench / page.with_suffix(".csv").name, page.with_suffix(".csv"))
    assert device.rewrite_from_csv(page).read_text() == (bench / page.name).read_text()
    readme = tmp_path / "README.md"
    shutil.copy(bench / "README.md", readme)
    shutil.copy(bench / "ralm_throughput.csv", tmp_path / "ralm_throughput.csv")
    assert ralm_throughput.rewrite_readme_from_csv(readme).read_text() == \
        (bench / "README.md").read_text()


def test_benchmark_tables_refuse_more_than_ten_columns() -> None:
    rows = [{f"c{i}": i for i in range(11)}]
    assert markdown_tables(rows, [("", [f"c{i}" for i in range(10)])])[0].count("|") == 11
    with pytest.raises(ConfigError, match="benchmark table 'wide'"):
        markdown_tables(rows, [("wide", [f"c{i}" for i in range(11)])])


def test_committed_judge_tables_are_rewritten_from_the_committed_decisions() -> None:
    from ragrepro.metrics.judge_set import load_judge_set
    from scripts import judge_eval

    items = load_judge_set()
    rows = judge_eval.summary_rows(items, judge_eval.done_rows(
        REPO_ROOT / "results" / "judge" / "judge_items.jsonl"))
    text = judge_eval.to_markdown(rows, len(items))
    assert text == (REPO_ROOT / "results" / "judge" / "judge_eval.md").read_text("utf-8")
    assert [len(h) for h in markdown_headers(text)] == [10, 7]
    with open(REPO_ROOT / "results" / "judge" / "judge_eval.csv", newline="") as f:
        committed = list(csv.DictReader(f))
    assert [(r["judge"], r["threshold"], r["said_yes"]) for r in committed] == \
        [(r["judge"], str(r["threshold"]), str(r["said_yes"])) for r in rows]


def test_every_paper_table_keeps_to_ten_columns_and_loses_no_column(tmp_path: Path) -> None:
    from ragrepro.report.table_render import header, with_flags
    from ragrepro.report.tables import build_all
    from tests.report.demo import build_demo

    built = build_all(build_demo(tmp_path / "results"))
    assert len(built) > 10
    for table in built:
        heads = markdown_headers(table.paths["md"].read_text("utf-8"))
        assert max(len(h) for h in heads) <= MAX_COLUMNS, (table.name, heads)
        assert all(h[0] == "Paper cell" for h in heads)  # each part names its rows
        wide = header(table.show, with_flags(table.rows))
        assert {c for h in heads for c in h} == set(wide), table.name  # nothing dropped
        rows = [ln for ln in table.paths["md"].read_text("utf-8").splitlines()
                if ln.startswith("| ") and not ln.startswith("| Paper cell")]
        assert len(rows) == len(heads) * len(table.rows)  # every part has every row
    riches = next(t for t in built if t.name == "riches/main_f1")
    assert len(riches.show) == 15  # 2 key columns + 15 settings: two tables of 10 and 9
    assert [len(h) for h in markdown_headers(riches.paths["md"].read_text("utf-8"))][2:] == \
        [10, 9]
