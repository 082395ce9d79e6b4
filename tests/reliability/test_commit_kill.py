"""Issue 24 item 6: no run without its row. A run's commit writes its CSV row, then renames
`tmp_<id>/` to `<id>/`; a kill between any two steps (ragrepro.faults kill_in_commit /
kill_in_overwrite, a real SIGKILL of the CLI process) must leave either an unfinished run
that the rerun redoes or a finished run with exactly one row."""
import os
import signal

import pytest
import warm_cli

from ragrepro import tracking
from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import Run, read_csv

# allow_code_change (not part of the run id): an edit to the checkout between the killed run
# and its rerun changes the dirty-code version, which test_code_version.py covers.
CMD = ["experiment=core/smoke", "seed=1", "wandb.mode=disabled", "allow_code_change=true"]
# core/smoke scores two fixed predictions: "the Beatles" is an exact match of "The Beatles";
# "Paris, France" against "Paris" has precision 1/2, recall 1, F1 2/3.
EM, F1 = 0.5, (1 + 2 / 3) / 2


def _cli(args, results, fault=None):
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled"}
    env.pop("RAGREPRO_FAULT", None)
    if fault:
        env["RAGREPRO_FAULT"] = fault
    return warm_cli.run([*args], env=env, cwd=REPO_ROOT, timeout=300)


def _state(results):
    """(CSV rows, finished run folders, tmp_ entries) of the experiment."""
    base = results / "core" / "smoke"
    folders = sorted(p.name for p in base.iterdir() if (p / "metrics.json").exists()
                     and not p.name.startswith("tmp_")) if base.exists() else []
    tmp = sorted(p.name for p in base.glob("tmp_*")) if base.exists() else []
    return read_csv(results / "core" / "smoke.csv"), folders, tmp


def _assert_one_finished_run(results):
    rows, folders, tmp = _state(results)
    assert len(rows) == 1 and folders == [rows[0]["run_id"]] and tmp == []
    assert float(rows[0]["em_squad"]) == EM
    assert float(rows[0]["f1_squad"]) == pytest.approx(F1, abs=1e-12)


@pytest.mark.parametrize("step", [1, 2, 3])
def test_kill_inside_commit_then_rerun_gives_one_row(tmp_path, step):
    killed = _cli(CMD, tmp_path, fault=f"kill_in_commit={step}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    rows, folders, tmp = _state(tmp_path)
    assert len(rows) == 1  # the row is written first
    if step < 3:  # killed before the rename: an unfinished run, redone by the rerun
        assert folders == [] and tmp == [f"tmp_{rows[0]['run_id']}"]
    else:  # killed after it: a finished run with its row
        assert folders == [rows[0]["run_id"]]
    rerun = _cli(CMD, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert ("already finished" in rerun.stdout + rerun.stderr) == (step == 3)
    _assert_one_finished_run(tmp_path)


@pytest.mark.parametrize("fault", ["kill_in_overwrite=1", "kill_in_overwrite=2",
                                   "kill_in_commit=1", "kill_in_commit=3"])
def test_kill_during_overwrite_then_plain_rerun_gives_one_row(tmp_path, fault):
    assert _cli(CMD, tmp_path).returncode == 0
    killed = _cli([*CMD, "overwrite=true"], tmp_path, fault=fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    rows, folders, _ = _state(tmp_path)
    if fault == "kill_in_overwrite=1":  # row dropped, folder still there
        assert rows == [] and len(folders) == 1
    rerun = _cli(CMD, tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    _assert_one_finished_run(tmp_path)


def _finished(root, run_id="r1"):
    run = Run("x/t", run_id, root)
    run.start()
    run.add_sample({"i": 0})
    with run.timed("score"):
        pass
    run.finish({"seed": 0}, {"m": 1.5, "per_seed": [1, 2]}, {"model": "a"},
               {"git_commit": "c", "code_id": "k"})
    return run


def test_finished_folder_without_row_gets_it_back(tmp_path, caplog):
    """The state older code left after a kill between rename and append: every skip path
    (runner, launchers) asks is_finished(), which restores the row from metrics.json."""
    run = _finished(tmp_path)
    original = read_csv(run.csv_path)
    tracking.drop_csv_row(run.csv_path, "r1")
    assert read_csv(run.csv_path) == []
    again = Run("x/t", "r1", tmp_path)
    assert again.is_finished()
    restored = read_csv(run.csv_path)
    assert "missing from" in caplog.text
    assert len(original) == len(restored) == 1
    strip = [{k: v for k, v in r[0].items() if k != "finished_at"} for r in (original, restored)]
    assert strip[0] == strip[1] and restored[0]["m"] == "1.5" and restored[0]["model"] == "a"
    assert again.is_finished() and len(read_csv(run.csv_path)) == 1  # idempotent


def test_failed_lock_leaves_an_unfinished_run_that_the_rerun_commits(tmp_path, monkeypatch):
    real = tracking.append_csv_row

    def no_lock(path, row):
        raise OSError(37, "No locks available (injected)")

    monkeypatch.setattr(tracking, "append_csv_row", no_lock)
    with pytest.raises(OSError, match="No locks"):
        _finished(tmp_path)
    run = Run("x/t", "r1", tmp_path)
    assert not run.is_finished() and (run.work_dir / "metrics.json").exists()
    assert read_csv(run.csv_path) == []
    monkeypatch.setattr(tracking, "append_csv_row", real)
    _finished(tmp_path)
    assert [r["run_id"] for r in read_csv(run.csv_path)] == ["r1"]
    assert run.is_finished() and not run.work_dir.exists()


def test_overwrite_replaces_folder_and_row(tmp_path):
    run = _finished(tmp_path)
    rerun = Run("x/t", "r1", tmp_path)
    rerun.start(overwrite=True)
    assert read_csv(run.csv_path) == [] and not rerun.final_dir.exists()
    assert not rerun.replaced_dir.exists()
    rerun.finish({"seed": 0}, {"m": 2.5}, {"model": "a"}, {})
    assert [r["m"] for r in read_csv(run.csv_path)] == ["2.5"]
