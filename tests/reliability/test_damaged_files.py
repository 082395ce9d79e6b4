"""Issue 28 item 4: a damaged results file is refused by name, never trusted; the CSV index is
repaired from the run folders. Two real core/smoke runs are written once through the CLI;
each case copies them, damages one thing, and follows it through `ragrepro check`, the
commands that read results (exit 2 with the file named, no traceback, or a repair with a
warning), `ragrepro check --repair` and a second, clean check. The repaired CSV must equal
the CSV the undamaged runs wrote, field by field."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import warm_cli

from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import read_csv

EXP = "core/smoke"
# allow_code_change: an edit to the checkout between the module's runs is not this test's topic
RUN = ["experiment=core/smoke", "wandb.mode=disabled", "allow_code_change=true"]


def _cli(args: list[str], results: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled"}
    env.pop("RAGREPRO_FAULT", None)
    return warm_cli.run([*args], env=env, cwd=REPO_ROOT, timeout=300)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """Two finished smoke runs (seed 1 and 2) and their CSV, as the runner wrote them."""
    root = tmp_path_factory.mktemp("pristine") / "results"
    for seed in (1, 2):
        done = _cli([*RUN, f"seed={seed}"], root)
        assert done.returncode == 0, done.stderr[-2000:]
    return root


@dataclass
class Tree:
    root: Path
    a: str  # the seed=1 run (first row), the one each case damages
    b: str

    @property
    def csv(self) -> Path:
        return self.root / "core" / "smoke.csv"

    def folder(self, run_id: str) -> Path:
        return self.root / "core" / "smoke" / run_id

    def lines(self) -> list[str]:
        return self.csv.read_text(encoding="utf-8").splitlines()

    def write_lines(self, lines: list[str]) -> None:
        self.csv.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8")


@pytest.fixture
def tree(pristine, tmp_path) -> Tree:
    root = tmp_path / "results"
    shutil.copytree(pristine, root)  # copy2: metrics.json keeps its time
    ids = [r["run_id"] for r in read_csv(root / "core" / "smoke.csv")]
    assert len(ids) == 2
    return Tree(root, ids[0], ids[1])


# ---- the damages -----------------------------------------------------------------------------
def half_metrics(t: Tree) -> None:
    p = t.folder(t.a) / "metrics.json"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def empty_metrics(t: Tree) -> None:
    (t.folder(t.a) / "metrics.json").write_text("")


def list_metrics(t: Tree) -> None:
    (t.folder(t.a) / "metrics.json").write_text("[1, 2]\n")


def metrics_without_settings(t: Tree) -> None:
    p = t.folder(t.a) / "metrics.json"
    data = json.loads(p.read_text())
    del data["settings"]
    p.write_text(json.dumps(data))


def torn_middle_sample(t: Tree) -> None:
    p = t.folder(t.a) / "samples.jsonl"
    first, second = p.read_text().splitlines()
    p.write_text(first[: len(first) // 2] + "\n" + second + "\n")


def binary_garbage(t: Tree) -> None:
    with open(t.csv, "ab") as f:
        f.write(b"\xff\xfe\x00garbage\n")


def text_garbage(t: Tree) -> None:
    with open(t.csv, "a", encoding="utf-8") as f:
        f.write("hello world\n")


def garbage_column(t: Tree) -> None:
    lines = t.lines()
    t.write_lines([lines[0] + ",hello world", *lines[1:]])


def cut_row(t: Tree) -> None:
    lines = t.lines()
    assert lines[1].startswith(t.a) and '"' not in lines[1]
    t.write_lines([lines[0], ",".join(lines[1].split(",")[:13]), *lines[2:]])


def edited_metric(t: Tree) -> None:
    header, *rows = t.lines()
    i = header.split(",").index("em_squad")
    fields = rows[0].split(",")
    assert fields[i] == "0.5"  # one of the two predictions is an exact match
    fields[i] = "0.75"
    t.write_lines([header, ",".join(fields), *rows[1:]])


def row_gone(t: Tree) -> None:
    lines = t.lines()
    t.write_lines([lines[0], *lines[2:]])


def folder_gone(t: Tree) -> None:
    shutil.rmtree(t.folder(t.a))


@dataclass(frozen=True)
class Case:
    damage: Callable[[Tree], None]
    kinds: frozenset[str]          # exactly what `ragrepro check` reports
    file: str                      # the file every problem line names ({a}: the run)
    says: str                      # what the messages say is wrong
    repairable: bool


CASES = {
    "metrics.json half-truncated": Case(half_metrics, frozenset({"damaged_file"}),
                                        "core/smoke/{a}/metrics.json", "malformed JSON at line",
                                        False),
    "metrics.json empty": Case(empty_metrics, frozenset({"damaged_file"}),
                               "core/smoke/{a}/metrics.json", "the file is empty", False),
    "metrics.json a list": Case(list_metrics, frozenset({"damaged_file"}),
                                "core/smoke/{a}/metrics.json",
                                "a JSON list where an object is expected", False),
    "metrics.json without settings": Case(metrics_without_settings,
                                          frozenset({"damaged_file"}),
                                          "core/smoke/{a}/metrics.json", "no 'settings' key",
                                          False),
    "samples.jsonl torn in the middle": Case(torn_middle_sample, frozenset({"damaged_file"}),
                                             "core/smoke/{a}/samples.jsonl:1",
                                             "malformed JSON at column", False),
    "binary garbage in the CSV": Case(binary_garbage,
                                      frozenset({"csv_unreadable", "field_count"}),
                                      "core/smoke.csv:4", "not valid UTF-8 at byte", True),
    "text garbage in the CSV": Case(text_garbage, frozenset({"field_count"}),
                                    "core/smoke.csv:4", "has 1 field(s), the header 25", True),
    "a garbage column in the header": Case(garbage_column,
                                           frozenset({"unknown_column", "field_count"}),
                                           "core/smoke.csv", "'hello world'", True),
    "a row cut to 13 fields": Case(cut_row, frozenset({"field_count"}), "core/smoke.csv:2",
                                   "has 13 field(s), the header 25", True),
    "an edited metric": Case(edited_metric, frozenset({"value_differs"}), "core/smoke.csv:2",
                             "em_squad: CSV '0.75', folder '0.5'", True),
    "a row gone": Case(row_gone, frozenset({"run_without_row"}), "core/smoke.csv",
                       "the finished run", True),
    "a folder gone": Case(folder_gone, frozenset({"row_without_run"}), "core/smoke.csv:2",
                          "has no finished folder", True),
}


def _problems(out: str) -> list[tuple[str, str]]:
    """(kind, rest of the line) of every problem line of `ragrepro check`."""
    lines = [line.removeprefix(f"{EXP}: ") for line in out.splitlines()
             if line.startswith(f"{EXP}: ") and not line.startswith(f"{EXP}: rewrote")
             and not line.startswith(f"{EXP}: removed")]
    return [tuple(line.split(": ", 1)) for line in lines]  # type: ignore[misc]


def _assert_csv_equals(repaired: Path, original: Path, skip_finished_at: str | None = None,
                       without: str | None = None) -> None:
    """Header and every field equal; `without` a run id the repair dropped; finished_at of
    `skip_finished_at` (a restored row takes metrics.json's time, and comes last, as
    tracking.restore_row appends it) checked for its form only."""
    want = [r for r in read_csv(original) if r["run_id"] != without]
    got = read_csv(repaired)
    if skip_finished_at:
        assert got[-1]["run_id"] == skip_finished_at
        want = sorted(want, key=lambda r: r["run_id"] == skip_finished_at)
    assert repaired.read_text().splitlines()[0] == original.read_text().splitlines()[0]
    assert [r["run_id"] for r in got] == [r["run_id"] for r in want]
    for g, w in zip(got, want):
        if g["run_id"] == skip_finished_at:
            assert len(g.pop("finished_at")) == 19 and w.pop("finished_at")
        assert g == w


@pytest.mark.parametrize("name", list(CASES))
def test_check_names_the_damage_and_repair_restores_the_csv(name, tree, pristine):
    case = CASES[name]
    case.damage(tree)
    named = str(tree.root / case.file.format(a=tree.a))
    found = _cli(["check", EXP, "--results-dir", str(tree.root)], tree.root)
    assert found.returncode == 1, found.stdout + found.stderr
    problems = _problems(found.stdout)
    assert {kind for kind, _ in problems} == case.kinds, found.stdout
    assert all(named.split(":")[0] in rest for _, rest in problems), found.stdout
    assert any(named in rest and case.says in rest for _, rest in problems), found.stdout
    assert "Traceback" not in found.stdout + found.stderr

    repaired = _cli(["check", EXP, "--results-dir", str(tree.root), "--repair"], tree.root)
    assert "Traceback" not in repaired.stdout + repaired.stderr
    if not case.repairable:
        # never guessed: the run stays as it is, the user is told to delete it and rerun
        assert repaired.returncode == 1, repaired.stdout
        assert f"not repaired: damaged_file: {named} is damaged" in repaired.stdout
        assert f"delete the folder {tree.folder(tree.a)}/ and rerun" in repaired.stdout
        assert tree.csv.read_bytes() == (pristine / "core" / "smoke.csv").read_bytes()
        shutil.rmtree(tree.folder(tree.a))  # what the message says to do
        again = _cli(["check", EXP, "--results-dir", str(tree.root), "--repair"], tree.root)
        assert again.returncode == 0, again.stdout
    else:
        assert repaired.returncode == 0, repaired.stdout
        assert "after repair: 0 problem(s) left" in repaired.stdout
    clean = _cli(["check", EXP, "--results-dir", str(tree.root)], tree.root)
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout.endswith("0 problem(s), 0 repairable\n")
    dropped = tree.a if (not case.repairable or case.damage is folder_gone) else None
    _assert_csv_equals(tree.csv, pristine / "core" / "smoke.csv", without=dropped,
                       skip_finished_at=tree.a if case.damage is row_gone else None)


# the commands that read a damaged file: exit 2, the file named, no traceback
REFUSED = [(n, c) for n, c in CASES.items() if not c.repairable or c.damage is binary_garbage]


@pytest.mark.parametrize("name", [n for n, _ in REFUSED])
def test_reading_commands_refuse_a_damaged_file_by_name(name, tree):
    case = CASES[name]
    case.damage(tree)
    named = str(tree.root / case.file.format(a=tree.a))
    before = {p: p.read_bytes() for p in tree.root.rglob("*") if p.is_file()}
    commands = [["samples", EXP, "--results", str(tree.root)]]
    if case.damage is not torn_middle_sample:  # the skip of a finished run reads no samples
        commands.append([*RUN, "seed=1"])
    for args in commands:
        done = _cli(args, tree.root)
        out = done.stdout + done.stderr
        assert done.returncode == 2, (args, out[-3000:])
        assert "Traceback" not in out
        assert f"{named} is damaged" in out and case.says in out, out[-3000:]
        fix = "ragrepro check --repair" if case.damage is binary_garbage else \
            f"delete the folder {tree.folder(tree.a)}/ and rerun the same command"
        assert fix in out
    # refused, not repaired: nothing was written
    assert {p: p.read_bytes() for p in tree.root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("name", [n for n, c in CASES.items()
                                  if c.repairable and c.damage is not binary_garbage])
def test_a_report_read_repairs_the_index_with_a_warning(name, tree, pristine):
    """The report's reader (here `ragrepro samples`) never keeps a CSV that disagrees with
    the folders: it warns, naming the CSV (and the run and column where there is one),
    rewrites the CSV, and shows the runs the folders hold."""
    case = CASES[name]
    case.damage(tree)
    done = _cli(["samples", EXP, "--results", str(tree.root)], tree.root)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert f"WARNING ragrepro.results_check: {tree.csv}" in out
    assert case.says in out
    if case.damage is edited_metric:
        assert f"run {tree.a} differs" in out and "the row was rewritten from the folder" in out
    shown = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("== ")]
    runs = [tree.b] if case.damage is folder_gone else [tree.a, tree.b]
    assert sorted(shown) == sorted(f"{EXP}/{r}" for r in runs)
    dropped = tree.a if case.damage is folder_gone else None
    _assert_csv_equals(tree.csv, pristine / "core" / "smoke.csv", without=dropped,
                       skip_finished_at=tree.a if case.damage is row_gone else None)
    # a second read finds nothing to repair
    second = _cli(["samples", EXP, "--results", str(tree.root)], tree.root)
    assert second.returncode == 0 and "WARNING ragrepro.results_check" not in second.stderr


def test_the_restored_row_takes_the_time_of_metrics_json(tree):
    row_gone(tree)
    stamp = (tree.folder(tree.a) / "metrics.json").stat().st_mtime
    assert _cli(["check", EXP, "--results-dir", str(tree.root), "--repair"],
                tree.root).returncode == 0
    (row,) = [r for r in read_csv(tree.csv) if r["run_id"] == tree.a]
    assert row["finished_at"] == time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(stamp))


@pytest.mark.parametrize("command", ["report", "compare", "table"])
def test_every_reading_subcommand_names_a_damaged_metrics_json(command, tree):
    """`table` and `report` read every run of the results folder (load_runs), so a damaged
    run stops them too, by name, rather than dropping out of a table unnoticed."""
    list_metrics(tree)
    args = {"report": ["report", "--results", str(tree.root)],
            "compare": ["compare", tree.a, tree.b, "--results", str(tree.root)],
            "table": ["table", "ralm/table1", "--results", str(tree.root)]}[command]
    done = _cli(args, tree.root)
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: {tree.folder(tree.a)}/metrics.json is damaged (a JSON list where an object is "
        f"expected). The run cannot be trusted: delete the folder {tree.folder(tree.a)}/ and "
        f"rerun the same command (`ragrepro check` lists every damaged file of the results "
        f"folder).")
