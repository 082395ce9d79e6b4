"""Guarantees of issue 8 on the model-free pipeline (the RALM/FilCo/RICHES pipelines add
their own window/example-level resume tests)."""
import json
import os
import signal

import pytest
import warm_cli

from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import read_csv

SWEEP = ["-m", "experiment=core/smoke_long", "seed=1,2,3", "wandb.mode=disabled"]


def _cli(args, results, **env):
    full_env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled", **env}
    return warm_cli.run([*args], env=full_env, cwd=REPO_ROOT, timeout=300)


def _metrics_by_seed(results):
    rows = read_csv(results / "core" / "smoke_long.csv")
    return {r["seed"]: (r["em_squad"], r["f1_squad"], r["run_id"]) for r in rows}, rows


def test_killed_sweep_resumes_to_identical_results(tmp_path):
    clean = tmp_path / "clean"
    assert _cli(SWEEP, clean).returncode == 0
    killed = tmp_path / "killed"
    # 12 examples per run: the 17th record is the 5th of the second job
    first = _cli(SWEEP, killed, RAGREPRO_FAULT="kill_after_samples=17",
                 RAGREPRO_FAULT_ONCE=str(tmp_path / "fired"))
    assert first.returncode == -signal.SIGKILL
    partial, _ = _metrics_by_seed(killed)
    assert list(partial) == ["1"]  # only the first job finished
    second = _cli(SWEEP, killed, RAGREPRO_FAULT="kill_after_samples=17",
                  RAGREPRO_FAULT_ONCE=str(tmp_path / "fired"))  # the same command again
    assert second.returncode == 0, second.stderr
    log = second.stdout + second.stderr
    assert "already finished" in log  # job 1 not recomputed
    assert "Resuming: 5 of 12" in log  # job 2 continued from its checkpoint
    expected, _ = _metrics_by_seed(clean)
    got, rows = _metrics_by_seed(killed)
    assert got == expected and len(rows) == 3  # exactly one row per run
    for _, _, run_id in got.values():
        a = (clean / "core" / "smoke_long" / run_id / "samples.jsonl").read_text()
        b = (killed / "core" / "smoke_long" / run_id / "samples.jsonl").read_text()
        assert a == b
    assert not list((killed / "core" / "smoke_long").glob("tmp_*"))


def test_full_disk_keeps_earlier_results(tmp_path):
    res = tmp_path / "r"
    assert _cli(["experiment=core/smoke", "seed=1"], res).returncode == 0
    before = (res / "core" / "smoke.csv").read_text()
    out = _cli(["experiment=core/smoke_long", "seed=1"], res,
               RAGREPRO_FAULT="enospc_after_samples=3")
    assert out.returncode != 0
    log = out.stdout + out.stderr
    assert "disk full" in log and "rerun the same command" in log
    assert (res / "core" / "smoke.csv").read_text() == before
    kept = (res / "core" / "smoke_long").glob("tmp_*/samples.jsonl")
    assert [len(p.read_text().splitlines()) for p in kept] == [3]  # work so far is kept


def test_same_config_twice_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for res in (a, b):
        assert _cli(["experiment=core/smoke_long", "seed=4"], res).returncode == 0
    ra, rb = read_csv(a / "core" / "smoke_long.csv"), read_csv(b / "core" / "smoke_long.csv")
    assert [(r["run_id"], r["em_squad"], r["f1_squad"]) for r in ra] == \
        [(r["run_id"], r["em_squad"], r["f1_squad"]) for r in rb]
    meta = json.loads(next((a / "core" / "smoke_long").glob("*/metrics.json")).read_text())
    assert meta["settings"]["seed"] == 4


@pytest.mark.parametrize("bad,expect", [
    (["experiment=core/smoke", "dtype=float8"], "dtype='float8' is not supported"),
    (["experiment=core/smoke", "limit=0"], "limit=0 must be a positive"),
    (["experiment=core/smok"], "Did you mean 'core/smoke'"),
])
def test_bad_settings_fail_with_named_fix(tmp_path, bad, expect):
    out = _cli(bad, tmp_path)
    assert out.returncode == 2 and expect in out.stderr + out.stdout


def test_joblib_parallel_jobs_share_one_clean_csv(tmp_path):
    out = _cli(["-m", "experiment=core/smoke_long", "seed=1,2,3,4",
                "hydra/launcher=local_parallel"], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = read_csv(tmp_path / "core" / "smoke_long.csv")
    assert sorted(r["seed"] for r in rows) == ["1", "2", "3", "4"]
    assert all(r["em_squad"] == rows[0]["em_squad"] != "" for r in rows)
    header = (tmp_path / "core" / "smoke_long.csv").read_text().splitlines()[0]
    assert header.count("run_id") == 1
