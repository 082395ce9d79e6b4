"""Issue 28 item 2 through the real launchers: a sweep relaunched while the first one still
runs (on the one-node Slurm of scripts/slurm_local.sh and on a local Ray head). The relaunch
submits the unfinished cell again (the launchers' pre-submit skip only knows finished runs);
its job finds the first job's writer lock (ragrepro/runlock.py) held by a live process and
skips without touching the run folder. Afterwards every cell has one row and whole files.

Two cells, two CPUs: RAGREPRO_FAULT=sleep_before_commit with RAGREPRO_FAULT_ONCE makes the
first cell that reaches its commit hold its lock until the test creates the release file;
the other cell finishes, which frees the CPU the relaunched job runs on."""
from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest
import warm_cli
from launcher_helpers import base_env, ragrepro

from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import read_csv

pytestmark = pytest.mark.cluster

SWEEP = ["-m", "experiment=core/smoke", "seed=0,1"]
SKIP = "is being written by host"


def _fault_env(results: Path, tmp: Path, **extra: str) -> dict[str, str]:
    return base_env(results, RAGREPRO_FAULT="sleep_before_commit=400",
                    RAGREPRO_FAULT_ONCE=str(tmp / "slept"),
                    RAGREPRO_FAULT_RELEASE=str(tmp / "release"), **extra)


def _wait_for(what: str, check, proc: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if proc.poll() is not None:
            out = proc.communicate()[0]
            raise AssertionError(f"the first sweep ended before {what}:\n{out[-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _assert_every_cell_once_and_whole(results: Path) -> None:
    rows = read_csv(results / "core" / "smoke.csv")
    base = results / "core" / "smoke"
    assert sorted(r["seed"] for r in rows) == ["0", "1"]
    assert sorted(p.name for p in base.iterdir()) == sorted(r["run_id"] for r in rows)
    for row in rows:  # nothing but finished folders: no tmp_, no lock file left
        folder = base / row["run_id"]
        assert {p.name for p in folder.iterdir()} == {"code.json", "config.json",
                                                      "metrics.json", "samples.jsonl"}
        metrics = json.loads((folder / "metrics.json").read_text())
        samples = (folder / "samples.jsonl").read_text().splitlines()
        assert metrics["settings"]["n_examples"] == len(samples) == 2
        assert float(row["em_squad"]) == 0.5


def _relaunch_while_running(tmp_path: Path, launcher: list[str], env: dict[str, str],
                            relaunch_log) -> str:
    """Checks the relaunch and the end state (above); returns the relaunching sweep's log."""
    results = tmp_path / "results"
    base = results / "core" / "smoke"
    first = warm_cli.start([*SWEEP, *launcher, f"hydra.sweep.dir={tmp_path / 'sweep1'}"],
                           env=env, cwd=REPO_ROOT, merge_stderr=True)
    try:
        # one cell finished, the other holds its lock before its commit
        _wait_for("one finished cell and one held lock",
                  lambda: len(read_csv(results / "core" / "smoke.csv")) == 1
                  and len(list(base.glob("*.writer"))) == 1, first)
        lock_file = next(base.glob("*.writer"))
        holder = json.loads(lock_file.read_text())
        again = ragrepro([*SWEEP, *launcher, f"hydra.sweep.dir={tmp_path / 'sweep2'}"], env,
                         timeout=400)
        log = again.stdout + again.stderr
        assert again.returncode == 0, log[-3000:]
        assert "2 cells, 1 already finished (skipped), 1 to run" in log
        run_id = lock_file.name.removesuffix(".writer")
        skipped = relaunch_log(log)
        assert (f"Run core/smoke/{run_id} {SKIP} {socket.gethostname()} pid {holder['pid']} "
                f"since {holder['started_at']}") in skipped, skipped[-3000:]
        assert first.poll() is None  # the first sweep still holds the cell
        assert json.loads(lock_file.read_text())["pid"] == holder["pid"]
        assert len(read_csv(results / "core" / "smoke.csv")) == 1
    finally:
        (tmp_path / "release").touch()
        out = first.communicate(timeout=400)[0]
    assert first.returncode == 0, out[-3000:]
    _assert_every_cell_once_and_whole(results)
    third = ragrepro([*SWEEP, *launcher, f"hydra.sweep.dir={tmp_path / 'sweep3'}"], env)
    assert "2 cells, 2 already finished (skipped), 0 to run" in third.stdout + third.stderr
    _assert_every_cell_once_and_whole(results)
    return log


def test_slurm_sweep_relaunched_while_running(slurm, tmp_path):
    def job_logs(_log: str) -> str:  # the relaunched job's own log, written on the node
        return "".join(p.read_text() for p in (tmp_path / "sweep2").rglob("*_log.*"))

    env = _fault_env(tmp_path / "results", tmp_path, SLURM_CONF=str(slurm))
    log = _relaunch_while_running(tmp_path, ["hydra/launcher=slurm"], env, job_logs)
    assert "job ids" in log  # the relaunched cell went to Slurm as a job


def test_ray_sweep_relaunched_while_running(ray_head, tmp_path):
    env = _fault_env(tmp_path / "results", tmp_path)
    launcher = ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_head}"]
    log = _relaunch_while_running(tmp_path, launcher, env, lambda log: log)  # workers log here
    assert "(_run_job pid=" in log  # the relaunched cell ran in a Ray worker
