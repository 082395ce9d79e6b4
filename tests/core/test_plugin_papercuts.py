"""What a plug-in author hit after the seam worked (issue 31, item 3), each with the toy
fourth method of tests/core/plugin_fixture.py installed from a temporary folder (a model, the
core's BM25 over a corpus of its own, a mini and a paper config): the plain rehearsal finds
its paper config and builds its tables; `ragrepro table --paper-scale` / `--experiment` read
the paper-scale runs in the `runs` layout; the core tests that list what is shipped pass with
it installed; messages name its own folders; docs/extending.md lists the toy's files."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragrepro.configcheck import group_folders, shown_folder
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.report import run_rows
from ragrepro.report.samples import DEFAULT_STATS
from ragrepro.tracking import Run
from tests.core.plugin_fixture import python, rows, write_toy


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    write_toy(tmp_path)
    return tmp_path


def test_the_plain_rehearsal_finds_a_plugins_paper_config_and_builds_its_tables(toy):
    listed = python(toy, "-c", "from scripts.rehearse import paper_experiments; "
                               "print('\\n'.join(paper_experiments()))").stdout.split()
    # what `make rehearse` (no --only) loops over: the core's paper configs and the toy's
    assert "toy/paper/main" in listed and "ralm/paper/table1" in listed
    assert "toy/main" not in listed  # mini configs are not rehearsed

    python(toy, "-m", "scripts.rehearse", "--only", "toy/paper/main")
    out = toy / "results" / "rehearsal"
    summary = rows(out / "summary.csv")
    # the paper config's sweep (toy/prompt: plain,terse), and no table failed
    assert [(r["experiment"], r["cell"], r["status"]) for r in summary] == [
        ("toy/paper/main", "toy/prompt=plain", "ok"), ("toy/paper/main", "toy/prompt=terse", "ok")]
    cells = rows(out / "toy" / "paper" / "main.csv")
    assert sorted(r["toy_prompt"] for r in cells) == ["plain", "terse"]
    assert {(r["model"], r["limit"], r["toy_max_new_tokens"]) for r in cells} == {
        ("gpt2-small (stand-in)", "2", "16")}
    # the paper grid of its spec ...
    grid = (out / "report" / "toy" / "main.md").read_text(encoding="utf-8")
    assert grid.startswith("# REHEARSAL (stand-ins, not results): Toy: our runs")
    # ... and its own results table, from the paper-scale rows, with the flags column
    md = (out / "toy" / "paper" / "main_table.md").read_text(encoding="utf-8")
    assert md.startswith("# Toy results (main)") and "| flags |" in md
    body = [line for line in md.splitlines() if line.startswith(("| plain", "| terse"))]
    # the first two questions' top passages hold their answers: 1 (2 of 2) on both rows
    assert [line.split(" | ")[1].split(" ")[0] for line in body] == ["1", "1"]
    assert all("gpt2-small (stand-in)" in line for line in body)


def _run(root: Path, experiment: str, run_id: str, prompt: str, hits: list[float]) -> None:
    run = Run(experiment, run_id, root)
    run.start()
    for i, h in enumerate(hits):
        run.add_sample({"qid": f"q{i}", "passage_has_answer": h})
    run.finish({"name": experiment}, {"passage_has_answer": sum(hits) / len(hits)},
               {"model": "m", "dataset": "d", "toy_prompt": prompt},
               {"git_commit": "abc1234", "git_dirty": False})


SPEC = {"name": "toy/main", "layout": "runs", "title": "Toy {table}", "by": ["toy_prompt"],
        "metrics": ["passage_has_answer"], "ci_metrics": [], "context": ["model"]}


def test_the_runs_layout_reads_the_paper_scale_runs_and_the_named_experiment(tmp_path):
    """`ragrepro table toy/main --paper-scale` reads results/toy/paper/main.csv (what the
    paper config writes) and `--experiment X` reads X's runs, not the spec name's."""
    res = tmp_path / "results"
    _run(res, "toy/main", "mini", "plain", [1.0, 0.0, 0.0, 0.0])          # 0.25
    _run(res, "toy/paper/main", "paper", "plain", [1.0, 1.0, 1.0, 0.0])   # 0.75
    _run(res, "toy/other", "other", "terse", [1.0, 1.0, 0.0, 0.0])       # 0.5

    def table(path: Path) -> list[str]:
        return [line for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith(("| plain", "| terse"))]

    (md, _csv) = run_rows.write_layout(SPEC, res, "toy/main", DEFAULT_STATS, False)
    assert md == res / "toy" / "main_table.md" and table(md) == ["| plain | 0.250 | m |"]
    (md, _csv) = run_rows.write_layout(SPEC, res, "toy/main", DEFAULT_STATS, True)
    assert md == res / "toy" / "paper" / "main_table.md"
    assert table(md) == ["| plain | 0.750 | m |"]
    # an experiment already at paper scale is not nested twice
    assert run_rows.write_layout(SPEC, res, "toy/paper/main", DEFAULT_STATS, True)[0] == md
    (md, _csv) = run_rows.write_layout(SPEC, res, "toy/other", DEFAULT_STATS, False)
    assert md == res / "toy" / "other_table.md" and table(md) == ["| terse | 0.500 | m |"]


def test_ragrepro_table_paper_scale_on_a_plugin_spec(toy):
    res = toy / "results"
    _run(res, "toy/paper/main", "paper", "terse", [1.0, 1.0, 1.0, 0.0])
    python(toy, "-m", "ragrepro", "table", "toy/main", "--method", "--paper-scale")
    md = (res / "toy" / "paper" / "main_table.md").read_text(encoding="utf-8")
    assert "| terse | 0.750 [" in md
    assert not (res / "toy" / "main_table.md").exists()


def test_the_core_tests_that_list_what_ships_pass_with_a_plugin_installed(toy):
    """They assert the shipped lists exactly; a plug-in beside them must not fail them."""
    code = ("from ragrepro.methods import registered\n"
            "from ragrepro.report.result_specs import result_spec_names\n"
            "assert 'toy' in [p.name for p in registered()]\n"
            "assert 'toy/main' in result_spec_names()\n"
            "from tests.core import test_method_plugin as a\n"
            "from tests.report import test_results_tables as b\n"
            "a.test_registry_refuses_what_is_not_a_profile()\n"
            "b.test_every_results_spec_loads()\n"
            "print('passed')\n")
    assert python(toy, "-c", code, cwd=REPO_ROOT).stdout.strip() == "passed"


def test_an_unknown_choice_of_a_plugin_group_names_the_plugins_folder(toy):
    done = python(toy, "-m", "ragrepro", "experiment=toy/main", "toy/prompt=tres", ok=False)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert "Unknown toy/prompt 'tres'." in line and "Available: plain, terse" in line
    assert f"(files in {toy / 'toyconf' / 'toy' / 'prompt'}/)" in line


def test_group_folders_names_each_folder_that_holds_the_group(tmp_path):
    plug = tmp_path / "plugconf"
    (plug / "model").mkdir(parents=True)
    (plug / "toy" / "prompt").mkdir(parents=True)
    assert shown_folder(CONF_DIR / "model") == "conf/model/"
    assert group_folders("model", [CONF_DIR, plug]) == f"conf/model/ and {plug}/model/"
    assert group_folders("toy/prompt", [CONF_DIR, plug]) == f"{plug}/toy/prompt/"
    assert group_folders("nowhere", [CONF_DIR, plug]) == "conf/nowhere/"


def test_extending_md_lists_the_toys_files(tmp_path):
    """docs/extending.md's file list of the worked example is the fixture's, file for file."""
    write_toy(tmp_path)
    text = (REPO_ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^<folder>/(\S+)", text, flags=re.MULTILINE))
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert listed == written
