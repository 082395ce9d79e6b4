"""Readers of committed evidence (ragrepro.report.runs over ragrepro.evidence): on a clone
whose results folder holds only results/evidence/<experiment>.jsonl.gz, `ragrepro samples`,
the results tables and the report read the bundle's runs, exactly as from unpacked folders;
local runs win; a bundle never makes the runner skip a run."""
from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path

import pytest

from ragrepro import evidence
from ragrepro.cli import user_errors_exit_2
from ragrepro.errors import DataError
from ragrepro.paths import REPO_ROOT
from ragrepro.report import results_tables, runs, sample_view
from ragrepro.report.build import build_report
from ragrepro.runner import run_for
from ragrepro.tracking import Run
from scripts import dtype_table, fig4_ladder

COMMITTED = REPO_ROOT / "results"
TABLE1_BUNDLE = evidence.bundle_path(COMMITTED, "ralm/table1")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))


def fresh_clone_results(root: Path, *experiments: str) -> Path:
    """A results folder as a fresh clone has it: the experiments' committed bundles, no run
    folder."""
    for experiment in experiments:
        bundle = evidence.bundle_path(root, experiment)
        bundle.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(evidence.bundle_path(COMMITTED, experiment), bundle)
    return root


@pytest.fixture
def clone(tmp_path) -> Path:
    """A results folder as a fresh clone has it for Table 1: the bundle, no run folder."""
    return fresh_clone_results(tmp_path / "results", "ralm/table1")


def _samples(capsys, root: Path, *args: str) -> str:
    capsys.readouterr()
    sample_view.main(["ralm/table1", *args, "--limit", "3", "--results", str(root)])
    return capsys.readouterr().out


def test_samples_read_from_the_bundle_print_what_unpacked_folders_print(clone, tmp_path,
                                                                          capsys, caplog):
    unpacked = tmp_path / "unpacked"
    evidence.unpack(evidence.bundle_path(clone, "ralm/table1"), unpacked)
    with caplog.at_level(logging.INFO, logger="ragrepro.report.runs"):
        from_bundle = _samples(capsys, clone, "model=gemma3-270m")
    assert from_bundle == _samples(capsys, unpacked, "model=gemma3-270m")
    assert from_bundle.count("== ralm/table1/") == 6  # gemma's six Table 1 rows
    assert "(3 shown of 56 matching, 56 samples)" in from_bundle
    shown = evidence.shown(evidence.bundle_path(clone, "ralm/table1"))
    assert [r.getMessage() for r in caplog.records] == [
        f"read 12 runs from {shown} (committed evidence; no local runs)"]
    assert not (clone / "ralm" / "table1").exists()  # nothing unpacked into results/


# every committed bundle and the committed table it ships the evidence of
BUNDLED_TABLES = {"ralm/table1": "ralm/table1.md", "ralm/fig8": "ralm/fig8_table.md",
                  "riches/main": "riches/main_table.md",
                  "riches/beam": "riches/beam_table.md",
                  "riches/interleave": "riches/interleave_table.md",
                  "riches/keys": "riches/keys_table.md",
                  "riches/main_ladder": "riches/main_ladder_table.md",
                  "filco/fig4_ladder": "filco/fig4_ladder_table.md"}


FIGURES_TABLE = "ralm/figures.md"  # one table of eight experiments (the test below)
DTYPE_TABLE = "ladder/dtype.md"    # scripts.dtype_table: two runs of two experiments
FILCO_CURVE = "ladder/filco_training_curve.md"  # scripts.filco_curve: the runs' training logs


# the Table 1 experiments whose tables are committed under results/ladder/ (the spec writes
# them as results/ralm/<name>.md and _summary.csv)
LADDER_COPIES = ("ralm/table1_ladder", "ralm/table1_foldoc", "ralm/table1_ladder_foldoc")
LADDER_CORPORA = ("wiki-vital", "foldoc")  # scripts.fig4_ladder's corpora whose runs all ship


# committed tables built from several bundles, or written elsewhere than their spec writes
# them, each with its own rebuild test below
OTHER_REBUILDS = {FIGURES_TABLE: None,  # its bundles: scripts.ralm_figures
                  DTYPE_TABLE: tuple(dtype_table.EXPERIMENTS.values()),
                  FILCO_CURVE: ("filco/fig4_ladder",),
                  **{f"ladder/{e.split('/')[1]}.md": (e,) for e in LADDER_COPIES},
                  **{f"ladder/fig4_{c}.md": fig4_ladder.EXPERIMENTS[c] for c in LADDER_CORPORA}}


def test_every_bundle_table_of_the_manifest_has_a_rebuild_test():
    """results/evidence/manifest.yaml (ragrepro.evidence_manifest) is whole, and every table
    it says is rebuilt from bundles is rebuilt by a test of this file, from those bundles."""
    from ragrepro import evidence_manifest
    from scripts.ralm_figures import FIGURES, REFERENCE_EXPERIMENT

    entries = evidence_manifest.load(COMMITTED)
    assert evidence_manifest.problems(COMMITTED, entries) == []
    listed = {e.table: e.bundles for e in entries if e.kind == "bundles"}
    tested = {md: (exp,) for exp, md in BUNDLED_TABLES.items()}
    tested.update({md: b or (*FIGURES, REFERENCE_EXPERIMENT) for md, b in OTHER_REBUILDS.items()})
    assert {t: sorted(b) for t, b in listed.items()} == {t: sorted(b) for t, b in tested.items()}


@pytest.mark.parametrize("experiment", sorted(BUNDLED_TABLES))
def test_a_table_rebuilt_from_its_bundle_alone_is_the_committed_table(experiment, tmp_path,
                                                                      monkeypatch):
    """A fresh clone's results folder: the bundle, no run folder; the table built from it is
    the committed file byte for byte (numbers, intervals, paired tests, flags, settings).
    The working directory stands for the clone's root: a FilCo table names its source CSV
    relative to it."""
    monkeypatch.chdir(tmp_path)
    root = fresh_clone_results(tmp_path / "results", experiment)
    (md,) = [p for p in results_tables.build(experiment, root) if p.suffix == ".md"]
    assert md.relative_to(root).as_posix() == BUNDLED_TABLES[experiment]
    assert md.read_text(encoding="utf-8") == (COMMITTED / BUNDLED_TABLES[experiment]).read_text(
        encoding="utf-8")
    if experiment == "ralm/fig8":  # one row read off by hand: 3 documents, n = 60 questions
        assert "| 3 | 0.083 [0.017, 0.167] | 0.817 [0.717, 0.900] | 0.967 | 60 |" in \
            md.read_text(encoding="utf-8")


def test_the_ralm_figures_rebuilt_from_their_bundles_are_the_committed_table(tmp_path,
                                                                           monkeypatch):
    """results/ralm/figures.md (scripts/ralm_figures.py) from the figures' eight bundles and
    Table 1's (the no-retrieval reference of the figures without their own), no run folder."""
    from scripts import ralm_figures

    root = fresh_clone_results(tmp_path / "results", *ralm_figures.FIGURES,
                               ralm_figures.REFERENCE_EXPERIMENT)
    monkeypatch.setenv("RAGREPRO_RESULTS", str(root))
    out = tmp_path / "figures.md"
    ralm_figures.main(["--out", str(out)])
    text = out.read_text(encoding="utf-8")
    assert text == (COMMITTED / FIGURES_TABLE).read_text(encoding="utf-8")
    assert "Not run yet" not in text
    # every row has its no-retrieval reference: the dense rows' own settings (faiss_index,
    # faiss_recall_*, ...) are declared retrieval-only in the Table 1 spec
    assert "no reference run" not in text
    assert "| fig3: retriever (top-1) | retriever=dense-minilm | smollm2-135m | dense-minilm | - | 9 " \
        "| 35.74 [27.41, 46.84] | +1.0% [-4.2, +5.4] | 0.734 |" in text


def test_the_dtype_table_rebuilt_from_its_bundles_is_the_committed_file(tmp_path):
    """results/ladder/dtype.md (scripts.dtype_table) from the float32 and bfloat16 runs'
    bundles alone; its float32 perplexity is exp(NLL sum / words) of the bundled run."""
    root = fresh_clone_results(tmp_path / "results", *dtype_table.EXPERIMENTS.values())
    assert dtype_table.main(["--results", str(root)]) == 0
    text = (root / DTYPE_TABLE).read_text(encoding="utf-8")
    assert text == (COMMITTED / DTYPE_TABLE).read_text(encoding="utf-8")
    (f32,) = runs.experiment_runs(root, dtype_table.EXPERIMENTS["float32"])
    assert f32.settings["dtype"] == "float32"
    ppl = math.exp(f32.metrics["nll_sum"] / f32.metrics["n_words"])
    assert f"| float32 | {ppl:.2f} [" in text


def test_the_filco_training_curves_rebuilt_from_the_bundle_are_the_committed_file(
        tmp_path, monkeypatch):
    """results/ladder/filco_training_curve.md (scripts.filco_curve) from the FilCo ladder's
    bundle alone: every fine-tuned model's per-step losses live in its runs' metrics.json."""
    from scripts import filco_curve

    root = fresh_clone_results(tmp_path / "results", "filco/fig4_ladder")
    monkeypatch.setenv("RAGREPRO_RESULTS", str(root))
    filco_curve.main(["filco/fig4_ladder"])
    text = (root / FILCO_CURVE).read_text(encoding="utf-8")
    assert text == (COMMITTED / FILCO_CURVE).read_text(encoding="utf-8")
    # one number by hand: a model's `mean of last 5` is the mean of its last five losses
    (run,) = [r for r in runs.experiment_runs(root, "filco/fig4_ladder")
              if r.settings.get("variant", r.settings.get("setting")) == "full"]
    losses = run.metadata["generator_train"]["losses"]
    assert f" | {sum(losses[-5:]) / 5:.3f} |" in text


@pytest.mark.parametrize("corpus", LADDER_CORPORA)
def test_the_ladder_tables_rebuilt_from_their_bundles_are_the_committed_files(corpus, tmp_path,
                                                                           monkeypatch):
    """The corpus's Table 1 tables committed under results/ladder/ (`ragrepro table ralm/table1
    --experiment <exp>`: the table and its summary CSV) and its Fig. 4 (scripts.fig4_ladder:
    both Table 1 experiments of the corpus), from the bundles alone."""
    experiments = fig4_ladder.EXPERIMENTS[corpus]
    root = fresh_clone_results(tmp_path / "results", *experiments)
    for experiment in (e for e in experiments if e in LADDER_COPIES):
        stem = experiment.split("/")[1]
        written = {p.relative_to(root).as_posix()
                   for p in results_tables.build(experiment, root)}
        assert written == {f"ralm/{stem}.md", f"ralm/{stem}_summary.csv"}
        for name in (f"{stem}.md", f"{stem}_summary.csv"):
            assert (root / "ralm" / name).read_text(encoding="utf-8") == \
                (COMMITTED / "ladder" / name).read_text(encoding="utf-8")
        # one row against the formula: a model without retrieval (the last by name),
        # PPL = exp(NLL sum / words)
        nones = [r for r in runs.experiment_runs(root, experiment) if r.text["rerank"] == "none"]
        base = max(nones, key=lambda r: r.text["model"])
        ppl = math.exp(base.metrics["nll_sum"] / base.metrics["n_words"])
        table = (root / "ralm" / f"{stem}.md").read_text(encoding="utf-8").splitlines()
        (line,) = [t for t in table if t.startswith(f"| {base.text['model']} | - | - | ")]
        assert f" | {ppl:.2f} [" in line
    monkeypatch.setenv("RAGREPRO_RESULTS", str(root))
    fig4_ladder.main(["--corpus", corpus])
    assert (root / "ladder" / f"fig4_{corpus}.md").read_text(encoding="utf-8") == \
        (COMMITTED / "ladder" / f"fig4_{corpus}.md").read_text(encoding="utf-8")


def test_a_bundle_never_makes_the_runner_skip_a_run(clone):
    read = runs.experiment_runs(clone, "ralm/table1")
    assert len(read) == 12 and all(r.dir is not None for r in read)
    for rec in read:
        assert not rec.dir.is_relative_to(clone)  # the cache, never results/
        run = run_for({**rec.config, "results_dir": str(clone)})
        assert run.run_id == rec.run_id  # the very cell the runner would compute...
        assert not run.is_finished()      # ...is not finished there, so it runs
    assert not (clone / "ralm" / "table1").exists() and not (clone / "ralm/table1.csv").exists()


def _tiny_run(root: Path, run_id: str, nll: float) -> None:
    run = Run("x/table", run_id, root)
    run.start()
    run.add_sample({"text": 0, "window": 0, "nll_sum": nll, "n_scored": 16})
    run.finish({"name": "x/table", "seed": 0}, {"nll_sum": nll, "n_windows": 1},
               {"model": "m", "seed": 0}, {"git_commit": "abc", "started_at": 1_700_000_000.0})


@pytest.fixture
def tiny(tmp_path) -> Path:
    """results/ holding a two-run bundle of x/table (nll 1.5 and 2.5), no folder."""
    src, root = tmp_path / "src", tmp_path / "results"
    _tiny_run(src, "aaa", 1.5)
    _tiny_run(src, "bbb", 2.5)
    evidence.pack(src, "x/table", evidence.bundle_path(root, "x/table"))
    return root


def _nlls(records) -> dict[str, float]:
    return {r.run_id: r.metrics["nll_sum"] for r in records if r.experiment == "x/table"}


def test_local_runs_win_over_the_bundle(tiny, caplog):
    assert _nlls(runs.experiment_runs(tiny, "x/table")) == {"aaa": 1.5, "bbb": 2.5}
    assert _nlls(runs.load_runs(tiny)) == {"aaa": 1.5, "bbb": 2.5}
    _tiny_run(tiny, "aaa", 9.0)  # computed here: same id, another value
    # The first reads above did log the bundle; only what the reads below log counts. (The
    # logger may already be at INFO when an earlier test configured logging.)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ragrepro.report.runs"):
        assert _nlls(runs.experiment_runs(tiny, "x/table")) == {"aaa": 9.0}
        assert _nlls(runs.load_runs(tiny)) == {"aaa": 9.0}  # bbb is the bundle's: not read
    assert runs.runs_root(tiny, "x/table") == tiny
    assert not [r for r in caplog.records if "committed evidence" in r.getMessage()]


def test_an_unfinished_local_run_does_not_hide_the_bundle(tiny):
    (tiny / "x" / "table" / "tmp_ccc").mkdir(parents=True)
    assert _nlls(runs.load_runs(tiny)) == {"aaa": 1.5, "bbb": 2.5}


def test_the_bundle_is_unpacked_once_and_afresh_when_it_changes(tiny, tmp_path):
    first = runs.runs_root(tiny, "x/table")
    assert first.is_relative_to(tmp_path / "cache" / "evidence")
    (first / "x" / "table" / "aaa" / "samples.jsonl").write_text("")  # a second read reuses it
    assert runs.runs_root(tiny, "x/table") == first
    src = tmp_path / "src"
    _tiny_run(src, "ccc", 4.0)
    evidence.pack(src, "x/table", evidence.bundle_path(tiny, "x/table"))  # a new bundle
    assert runs.runs_root(tiny, "x/table") != first
    assert _nlls(runs.experiment_runs(tiny, "x/table")) == {"aaa": 1.5, "bbb": 2.5, "ccc": 4.0}


def test_a_damaged_bundle_is_refused_by_name(tiny, capsys):
    path = evidence.bundle_path(tiny, "x/table")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match="is damaged") as e:
        runs.load_runs(tiny)
    assert str(path) in str(e.value)
    with pytest.raises(SystemExit) as exit_:  # as `ragrepro samples` runs it
        user_errors_exit_2(lambda: sample_view.main(["x/table", "--results", str(tiny)]))
    assert exit_.value.code == 2
    assert f"error: {path} is damaged" in capsys.readouterr().err


def test_a_bundle_in_the_wrong_place_is_refused(tiny):
    assert len(runs.experiment_runs(tiny, "x/table")) == 2  # unpacked into the cache once
    moved = evidence.bundle_path(tiny, "y/table")
    moved.parent.mkdir(parents=True)
    evidence.bundle_path(tiny, "x/table").rename(moved)
    with pytest.raises(DataError, match="holds the runs of 'x/table', but its place names "
                                        "'y/table'"):
        runs.experiment_runs(tiny, "y/table")


def test_the_report_and_dashboard_read_the_bundle(clone):
    report = build_report(clone)
    bundled = {str(e["run_id"]) for e in evidence.read_bundle(TABLE1_BUNDLE)[1]}
    assert len(bundled) == 12 and {r.run_id for r in report.runs} == bundled
    table1 = next(t for t in report.tables if t.name == "ralm/table1")
    assert {r.run_id for r in table1.rows if r.run_id} == bundled  # every run in the grid
    page = report.index.read_text(encoding="utf-8")
    assert all(f"ralm/table1/{r.run_id}/samples.jsonl" in page for r in report.runs)


def test_one_experiments_reader_unpacks_only_its_bundle(tiny):
    # another experiment's bundle, damaged: reading every run refuses it by name; reading
    # x/table alone never opens it
    other = evidence.bundle_path(tiny, "y/other")
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(b"not a gzip file")
    with pytest.raises(DataError, match="y/other"):
        runs.load_runs(tiny)
    assert _nlls(runs.load_runs(tiny, "x/table")) == {"aaa": 1.5, "bbb": 2.5}
    assert {r.experiment for r in runs.load_runs(tiny, "x/table")} == {"x/table"}
