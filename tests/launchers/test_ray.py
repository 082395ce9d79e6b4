"""Issue 16, Ray: sweeps through `hydra/launcher=ray` on a real Ray head (127.0.0.1, 2 CPUs)
give one CSV row per cell with the numbers of the local launcher; a worker killed mid-sweep
leaves the finished cells alone and a rerun completes only the missing one."""
import json
import re

import pytest
from launcher_helpers import base_env, ragrepro

from ragrepro.tracking import read_csv

pytestmark = pytest.mark.cluster

SMOKE = ["-m", "experiment=core/smoke", "seed=0,1,2"]
METRICS = ("em_squad", "f1_squad", "n_examples", "seed")


def _ray(address):
    return ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}"]


def _rows(results, name="core/smoke"):
    return {r["run_id"]: r for r in read_csv(results / f"{name}.csv")}


def test_ray_sweep_matches_local_launcher(ray_head, tmp_path):
    local = ragrepro(SMOKE, base_env(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-3000:]
    remote = ragrepro(SMOKE + _ray(ray_head), base_env(tmp_path / "ray"))
    assert remote.returncode == 0, remote.stderr[-3000:]
    a, b = _rows(tmp_path / "local"), _rows(tmp_path / "ray")
    assert len(b) == 3 and sorted(a) == sorted(b)  # one row per cell, same run ids
    for run_id, row in a.items():
        assert {k: b[run_id][k] for k in METRICS} == {k: row[k] for k in METRICS}
    # the cells ran in Ray workers, not in the driver
    assert "(_run_job pid=" in remote.stdout + remote.stderr
    # every cell of this sweep is in one W&B group named after the sweep
    groups = {json.loads((tmp_path / "ray" / "core" / "smoke" / r / "metrics.json").read_text())
              ["metadata"]["wandb_group"] for r in b}
    assert len(groups) == 1 and re.fullmatch(r"core/smoke/sweep-.+", groups.pop())
    # a second run of the same sweep submits nothing
    again = ragrepro(SMOKE + _ray(ray_head), base_env(tmp_path / "ray"))
    assert again.returncode == 0
    assert "3 cells, 3 already finished (skipped), 0 to run" in again.stdout + again.stderr


def test_killed_worker_then_rerun_completes_only_the_missing_cell(ray_head, tmp_path):
    results = tmp_path / "results"
    # SIGKILL the worker after its first record, once; Ray may not retry (max_retries=0)
    fault = {"RAGREPRO_FAULT": "kill_after_samples=1",
             "RAGREPRO_FAULT_ONCE": str(tmp_path / "fired")}
    args = SMOKE + _ray(ray_head) + ["hydra.launcher.ray.remote.max_retries=0"]
    killed = ragrepro(args, base_env(results, **fault))
    log = killed.stdout + killed.stderr
    assert killed.returncode != 0
    assert "1 sweep cell(s) failed" in log and "rerun the same command" in log
    survivors = _rows(results)
    assert len(survivors) == 2  # the other cells finished and were kept
    partial = list((results / "core" / "smoke").glob("tmp_*/samples.jsonl"))
    assert len(partial) == 1 and len(partial[0].read_text().splitlines()) == 1
    rerun = ragrepro(args, base_env(results, **fault))
    log = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, log[-3000:]
    assert "3 cells, 2 already finished (skipped), 1 to run" in log
    assert "Resuming: 1 of 2 examples already scored" in log
    after = _rows(results)
    assert len(after) == 3
    for run_id, row in survivors.items():  # untouched: same row, same timestamp
        assert after[run_id] == row


def test_ray_retries_a_killed_worker_and_the_retry_resumes(ray_head, tmp_path):
    results = tmp_path / "results"
    fault = {"RAGREPRO_FAULT": "kill_after_samples=1",
             "RAGREPRO_FAULT_ONCE": str(tmp_path / "fired")}
    done = ragrepro(SMOKE + _ray(ray_head), base_env(results, **fault))  # max_retries: 3
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert (tmp_path / "fired").exists() and "Resuming: 1 of 2 examples" in log
    assert len(_rows(results)) == 3


@pytest.mark.slow
def test_embedded_model_cell_on_ray_equals_local(ray_head, tmp_path):
    cell = ["experiment=ralm/table1", "model=smollm2-135m", "ralm/rerank=none", "limit=1",
            "ralm.max_length=64", "ralm.stride=32"]
    local = ragrepro(["-m", *cell], base_env(tmp_path / "local"), timeout=600)
    assert local.returncode == 0, local.stderr[-3000:]
    remote = ragrepro(["-m", *cell, *_ray(ray_head)], base_env(tmp_path / "ray"), timeout=600)
    assert remote.returncode == 0, remote.stderr[-3000:]
    a = _rows(tmp_path / "local", "ralm/table1")
    b = _rows(tmp_path / "ray", "ralm/table1")
    assert len(b) == 1 and sorted(a) == sorted(b)
    row_a, row_b = next(iter(a.values())), next(iter(b.values()))
    assert float(row_b["ppl_token"]) > 1
    assert (row_b["ppl_token"], row_b["ppl_word"]) == (row_a["ppl_token"], row_a["ppl_word"])
