"""Every experiment config composes and resolves; the CLI runs end to end on the smoke
experiment and writes the CSV row with the right numbers; bad names get suggestions."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import warm_cli
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro.configcheck import check_overrides, group_options
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.tracking import read_csv

EXPERIMENTS = group_options("experiment")


def test_there_are_experiments():
    assert "core/smoke" in EXPERIMENTS


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes_and_resolves(experiment):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"experiment={experiment}"])
    resolved = OmegaConf.to_container(cfg, resolve=True)
    assert resolved["pipeline"] and resolved["pipeline"]["_target_"], experiment
    assert resolved["name"] != "default", f"{experiment} must set its own name"
    from hydra.utils import get_method

    get_method(resolved["pipeline"]["_target_"])  # the pipeline function exists


def _cli(*args, env_extra=None, cwd=REPO_ROOT, fresh=False):
    """The CLI from the suite's warm server (tests/warm_cli.py); fresh: a new interpreter."""
    env = {**os.environ, "WANDB_MODE": "disabled", **(env_extra or {})}
    if not fresh:
        return warm_cli.run(list(args), env=env, cwd=cwd, timeout=300)
    return subprocess.run([sys.executable, "-m", "ragrepro", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300, check=False)


def test_smoke_run_end_to_end(tmp_path):
    res_dir = tmp_path / "res"
    out = _cli("experiment=core/smoke", "wandb.mode=disabled",
               env_extra={"RAGREPRO_RESULTS": str(res_dir)}, fresh=True)  # as CI's smoke run
    assert out.returncode == 0, out.stderr
    rows = read_csv(res_dir / "core" / "smoke.csv")
    assert len(rows) == 1
    # EM: "the Beatles" == "The Beatles" (1), "Paris, France" != "Paris" (0) -> 0.5
    # F1: 1 and 2/3 -> 5/6
    assert float(rows[0]["em_squad"]) == pytest.approx(0.5)
    assert float(rows[0]["f1_squad"]) == pytest.approx(5 / 6)
    run_dir = res_dir / "core" / "smoke" / rows[0]["run_id"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["metadata"]["packages"]["torch"]
    assert len((run_dir / "samples.jsonl").read_text().splitlines()) == 2
    # rerun: skipped, still one row
    again = _cli("experiment=core/smoke", env_extra={"RAGREPRO_RESULTS": str(res_dir)})
    assert again.returncode == 0 and "already finished" in again.stderr + again.stdout
    assert len(read_csv(res_dir / "core" / "smoke.csv")) == 1


def test_multirun_sweep_one_row_per_job(tmp_path):
    res_dir = tmp_path / "res"
    out = _cli("-m", "experiment=core/smoke", "seed=1,2",
               env_extra={"RAGREPRO_RESULTS": str(res_dir)})
    assert out.returncode == 0, out.stderr
    rows = read_csv(res_dir / "core" / "smoke.csv")
    assert sorted(r["seed"] for r in rows) == ["1", "2"]


def test_cfg_job_prints_resolved_config():
    out = _cli("experiment=core/smoke", "--cfg", "job")
    assert out.returncode == 0, out.stderr
    assert "name: core/smoke" in out.stdout


def test_unknown_names_get_suggestions():
    with pytest.raises(ConfigError, match="Did you mean 'smollm2-135m'"):
        check_overrides(["model=smollm2-135"])
    with pytest.raises(ConfigError, match="Unknown experiment"):
        check_overrides(["experiment=core/smok"])
    out = _cli("model=gemma3-27m")
    assert out.returncode == 2 and "gemma3-270m" in out.stderr
    check_overrides(["model=smollm2-135m,gemma3-270m", "seed=3"])  # valid lists pass


def test_launcher_configs_exist():
    assert (Path(CONF_DIR) / "hydra" / "launcher" / "local_parallel.yaml").exists()
