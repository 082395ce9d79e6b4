"""results/evidence/manifest.yaml (ragrepro.evidence_manifest): what backs each committed
table, checked against the files; readers that find no run of a pending experiment say what
its committed table lacks and how to regenerate it."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ragrepro import evidence, evidence_cli, evidence_manifest
from ragrepro.cli import user_errors_exit_2
from ragrepro.errors import ConfigError, DataError
from ragrepro.report import attest_cli, sample_view

MANIFEST = """\
tables:
  x/a.md:
    bundles: [x/a]
    rebuild: ragrepro table x/a
  b.md:
    inputs: [b.csv]
    rebuild: python -m b
  c/c_table.md:
    runs: [c/exp]
    pending: its runs were not packed
    regenerate: ragrepro -m experiment=c/exp
    cost: about 2 h
"""


@pytest.fixture
def results(tmp_path) -> Path:
    """A results folder (not in a git checkout) whose manifest matches its files."""
    root = tmp_path / "results"
    for name in ("x/a.md", "b.md", "b.csv", "c/c_table.md", "evidence/x/a.jsonl.gz"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n", encoding="utf-8")
    (root / "evidence" / "manifest.yaml").write_text(MANIFEST, encoding="utf-8")
    return root


def _problems(root: Path) -> list[str]:
    return evidence_manifest.problems(root, evidence_manifest.load(root))


def test_a_whole_manifest_has_no_problem_and_reads_each_kind(results):
    entries = evidence_manifest.load(results)
    assert [(e.table, e.kind) for e in entries] == [
        ("x/a.md", "bundles"), ("b.md", "inputs"), ("c/c_table.md", "pending")]
    assert entries[0].bundles == ("x/a",) and entries[1].inputs == ("b.csv",)
    assert entries[2].runs == ("c/exp",) and entries[2].cost == "about 2 h"
    assert _problems(results) == []


def test_each_disagreement_with_the_files_is_named(results):
    (results / "d.md").write_text("unlisted\n", encoding="utf-8")
    evidence.bundle_path(results, "x/a").unlink()
    (results / "b.csv").unlink()
    (results / "evidence" / "y").mkdir()
    evidence.bundle_path(results, "y/z").write_bytes(b"")
    (results / "c" / "c_table.md").unlink()
    assert _problems(results) == [
        ("d.md: a committed table the manifest does not list (add it to "
         "results/evidence/manifest.yaml)"),
        ("x/a.md: its bundle evidence/x/a.jsonl.gz is missing (pack it: "
         "`ragrepro evidence pack x/a`)"),
        "b.md: its input b.csv is missing",
        "c/c_table.md: listed, but no such file under results/",
        "evidence/y/z.jsonl.gz backs no table in the manifest"]


def test_in_a_git_checkout_only_what_git_would_commit_is_a_table(results):
    subprocess.run(["git", "init", "-q", str(results)], check=True)
    (results / ".gitignore").write_text("local/\n", encoding="utf-8")
    (results / "local").mkdir()
    (results / "local" / "rerun.md").write_text("a run's own output\n", encoding="utf-8")
    (results / "new.md").write_text("new, not yet added\n", encoding="utf-8")
    assert evidence_manifest.committed_tables(results) == ["b.md", "c/c_table.md", "new.md",
                                                           "x/a.md"]


@pytest.mark.parametrize(("entry", "message"), [
    ("bundles: [x/a]\n    inputs: [b.csv]\n    rebuild: r",
     "needs exactly one of bundles, inputs, pending (has bundles, inputs)"),
    ("rebuild: r", "needs exactly one of bundles, inputs, pending (has none)"),
    ("bundles: [x/a]", "must say `rebuild`"),
    ("pending: why\n    regenerate: r\n    cost: 1 h", "must say `runs`"),
    ("bundles: [x/a]\n    rebuild: r\n    rebiuld: r", "unknown keys ['rebiuld']"),
])
def test_a_bad_entry_is_refused_by_table_and_key(results, entry, message):
    (results / "evidence" / "manifest.yaml").write_text(
        f"tables:\n  x/a.md:\n    {entry}\n", encoding="utf-8")
    with pytest.raises(DataError, match="the entry of 'x/a.md'|'x/a.md' must") as e:
        evidence_manifest.load(results)
    assert message in str(e.value)


def test_a_damaged_or_missing_manifest_is_refused_by_name(results):
    path = results / "evidence" / "manifest.yaml"
    path.write_text("tables:\n  x/a.md: [\n", encoding="utf-8")
    with pytest.raises(DataError, match="is not valid YAML") as e:
        evidence_manifest.load(results)
    assert str(path) in str(e.value)
    path.unlink()
    with pytest.raises(DataError, match="no evidence manifest .*git checkout"):
        evidence_manifest.load(results)


def test_status_prints_the_table_and_exits_2_on_a_problem(results, capsys):
    evidence.bundle_path(results, "x/a").write_bytes(b"x" * 250_000)  # 0.25 MB
    assert evidence_cli.main(["status", "--bundles", str(results), "--write"]) == 0
    out = capsys.readouterr().out
    assert "| x/a.md | bundles: x/a | 0.25 | ragrepro table x/a |" in out
    assert ("| c/c_table.md | no evidence (c/exp): its runs were not packed |  | "
            "ragrepro -m experiment=c/exp (about 2 h) |") in out
    assert out.endswith("3 committed tables: 1 rebuilt from shipped bundles, 1 measurements "
                        "with their inputs, 1 without evidence. 1 bundles, 0.25 MB in all.\n")
    assert (results / "evidence" / "status.md").read_text(encoding="utf-8") == out
    (results / "b.csv").unlink()
    assert evidence_cli.main(["status", "--bundles", str(results)]) == 2
    assert capsys.readouterr().err == "error: b.md: its input b.csv is missing\n"


def test_pack_without_an_experiment_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        evidence_cli.main(["pack"])
    assert e.value.code == 2
    assert "pack needs at least one experiment" in capsys.readouterr().err


def test_readers_that_find_no_run_of_a_pending_experiment_say_how_to_make_it(results, capsys):
    note = evidence_manifest.pending_note(results, "c/exp")
    assert note == (" Its committed table results/c/c_table.md ships no evidence (its runs "
                    "were not packed); regenerate it with `ragrepro -m experiment=c/exp` "
                    "(about 2 h).")
    assert evidence_manifest.pending_note(results, "c/other") == ""
    assert evidence_manifest.pending_note(results.parent / "nowhere", "c/exp") == ""
    evidence.bundle_path(results, "x/a").unlink()  # a placeholder, not a bundle a reader opens
    with pytest.raises(ConfigError) as e:
        sample_view.render(results, "c/exp", {}, sample_view.Filters())
    assert str(e.value).endswith(note)
    with pytest.raises(ConfigError) as e:  # `ragrepro attest c/exp`
        attest_cli.finished_runs(results, "c/exp", [])
    assert str(e.value).endswith(note)
    with pytest.raises(SystemExit):  # as `ragrepro samples` prints it
        user_errors_exit_2(lambda: sample_view.main(["c/exp", "--results", str(results)]))
    assert note.strip() in capsys.readouterr().err


def test_the_committed_status_page_is_the_manifest_and_bundles_as_they_are():
    """results/evidence/status.md (docs/report.md includes its table) is what `ragrepro
    evidence status --write` writes now: a manifest edit or a repacked bundle without it fails."""
    from ragrepro.paths import REPO_ROOT

    root = REPO_ROOT / "results"
    assert (root / "evidence" / "status.md").read_text(encoding="utf-8") == \
        evidence_manifest.render(evidence_manifest.load(root), root)


def test_the_committed_manifest_names_what_each_pending_table_needs():
    """Every pending entry of the committed manifest names runs, a command and a cost, and
    no pending table is one whose bundle ships (it would be listed as bundles)."""
    from ragrepro.paths import REPO_ROOT

    root = REPO_ROOT / "results"
    entries = evidence_manifest.load(root)
    shipped = set(evidence.bundles(root))
    for e in entries:
        if e.kind == "pending":
            assert e.runs and e.regenerate and e.cost, e.table
            assert not set(e.runs) <= shipped, f"{e.table}: its runs ship; list its bundles"
