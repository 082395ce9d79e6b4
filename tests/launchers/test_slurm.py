"""Issue 16, Slurm: `hydra/launcher=slurm` submits a sweep as a job array to a real one-node
Slurm (scripts/slurm_local.sh), rows, logs and exit codes check out; a failing cell shows its
error in the Hydra output and leaves no row; requests and partition reach sbatch; a killed
job is noticed without `sacct` and a rerun submits only the unfinished cells."""
import re
import subprocess
import time

import pytest
from launcher_helpers import base_env, ragrepro

from ragrepro.tracking import read_csv

pytestmark = pytest.mark.cluster

SMOKE = ["-m", "experiment=core/smoke"]
ACTIVE = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING")


def _slurm(conf, sweep_dir):
    return ["hydra/launcher=slurm", f"hydra.sweep.dir={sweep_dir}"]


def _env(results, conf, **extra):
    return base_env(results, SLURM_CONF=str(conf), **extra)


def _jobs(conf, log, seconds=60):
    """scontrol's final record of every array task this sweep submitted (a task that wrote
    its result may still be finishing for a moment), by 'array_task' id."""
    ids = re.findall(r"job ids ([\d_, ]+)", log)
    assert ids, log[-2000:]
    wanted = [j.strip() for group in ids for j in group.split(",") if j.strip()]
    deadline = time.time() + seconds
    while True:
        records = _scontrol(conf)
        jobs = {j: records[j] for j in wanted}
        if all(r["JobState"] not in ACTIVE for r in jobs.values()) or time.time() > deadline:
            return jobs
        time.sleep(0.5)


def _scontrol(conf):
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True,
                         env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}, check=True)
    records = {}
    for line in out.stdout.splitlines():
        f = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in f:  # a one-cell array is submitted as a plain job
            records[f["JobId"]] = f
        if "ArrayTaskId" in f:
            records[f"{f['ArrayJobId']}_{f['ArrayTaskId']}"] = f
    return records


def test_sweep_as_job_array_rows_logs_exit_codes(slurm, tmp_path):
    res, sweep = tmp_path / "results", tmp_path / "sweep"
    done = ragrepro(SMOKE + ["seed=0,1,2"] + _slurm(slurm, sweep), _env(res, slurm))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "Submitted 3 cells as one array" in log
    rows = read_csv(res / "core" / "smoke.csv")
    assert sorted(r["seed"] for r in rows) == ["0", "1", "2"]
    jobs = _jobs(slurm, log)
    assert len(jobs) == 3 and len({j.split("_")[0] for j in jobs}) == 1  # one array
    for job_id, rec in jobs.items():
        assert (rec["JobState"], rec["ExitCode"]) == ("COMPLETED", "0:0"), rec
        out = next((sweep / ".submitit" / job_id).glob("*_log.out")).read_text()
        assert "Finished core/smoke/" in out  # the cell's own log, written on the node
    # rerun: nothing left to submit
    again = ragrepro(SMOKE + ["seed=0,1,2"] + _slurm(slurm, sweep), _env(res, slurm))
    assert "3 cells, 3 already finished (skipped), 0 to run" in again.stdout + again.stderr


def test_failing_cell_shows_its_error_and_leaves_no_row(slurm, tmp_path):
    res = tmp_path / "results"
    args = SMOKE + ["smoke.metrics=[em_squad],[em_squad,no_such_metric]"]
    failed = ragrepro(args + _slurm(slurm, tmp_path / "sweep"), _env(res, slurm))
    log = failed.stdout + failed.stderr
    assert failed.returncode != 0
    assert "1 sweep cell(s) failed" in log and "no_such_metric" in log
    rows = read_csv(res / "core" / "smoke.csv")
    assert len(rows) == 1 and "em_squad" in rows[0]  # the good cell only
    finished = [p for p in (res / "core" / "smoke").iterdir() if not p.name.startswith("tmp_")]
    assert len(finished) == 1
    states = sorted(r["JobState"] for r in _jobs(slurm, log).values())
    assert states == ["COMPLETED", "FAILED"]


def test_per_cell_requests_and_partition_reach_sbatch(slurm, tmp_path):
    res, sweep = tmp_path / "results", tmp_path / "sweep"
    # seed follows the request so that the two cells are two runs (resources are not part
    # of the run id)
    args = SMOKE + ["seed=${resources.cpus}", "resources.cpus=1,2",
                    "hydra.launcher.partition=debug"]
    done = ragrepro(args + _slurm(slurm, sweep), _env(res, slurm))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    jobs = _jobs(slurm, log)
    assert len({j.split("_")[0] for j in jobs}) == 2  # two requests, two arrays
    assert sorted(r["NumCPUs"] for r in jobs.values()) == ["1", "2"]
    assert {r["Partition"] for r in jobs.values()} == {"debug"}
    assert len(read_csv(res / "core" / "smoke.csv")) == 2
    bad = ragrepro(SMOKE + ["hydra.launcher.partition=nonexistent"] +
                   _slurm(slurm, tmp_path / "sweep2"), _env(tmp_path / "r2", slurm))
    assert bad.returncode != 0 and "invalid partition" in (bad.stdout + bad.stderr).lower()


def test_killed_job_is_noticed_and_rerun_submits_only_unfinished(slurm, tmp_path):
    res = tmp_path / "results"
    fault = {"RAGREPRO_FAULT": "kill_after_samples=1",
             "RAGREPRO_FAULT_ONCE": str(tmp_path / "fired")}
    args = SMOKE + ["seed=0,1,2", "hydra.launcher.max_num_timeout=0"]
    killed = ragrepro(args + _slurm(slurm, tmp_path / "sweep"), _env(res, slurm, **fault))
    log = killed.stdout + killed.stderr
    assert killed.returncode != 0 and "1 sweep cell(s) failed" in log, log[-3000:]
    assert "no accounting" in log  # states came from scontrol, not sacct
    assert len(read_csv(res / "core" / "smoke.csv")) == 2
    rerun = ragrepro(args + _slurm(slurm, tmp_path / "sweep"), _env(res, slurm, **fault))
    log = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, log[-3000:]
    assert "3 cells, 2 already finished (skipped), 1 to run" in log
    assert "Submitted 1 cells as one array" in log
    assert len(read_csv(res / "core" / "smoke.csv")) == 3
