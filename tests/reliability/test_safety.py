"""Issue 8 guarantee 6: no remote code unless asked, no pickle, secrets never written."""
import os
import re

import warm_cli
import yaml

from ragrepro.configcheck import config_dirs
from ragrepro.paths import REPO_ROOT

PACKAGES = ("ragrepro", "ralm", "riches", "filco", "scripts")


def test_trust_remote_code_is_off_in_every_model_config():
    for path in sorted(p for d in config_dirs() for p in (d / "model").glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text())
        if "_target_" in cfg and cfg["_target_"].endswith("load_lm"):
            assert cfg.get("trust_remote_code") is False, path.name


def test_no_pickle_in_results_or_caches():
    pattern = re.compile(r"^\s*(import pickle|from pickle|import dill)|torch\.load\((?!.*weights_only=True)")
    offenders = []
    for pkg in PACKAGES:
        for path in (REPO_ROOT / pkg).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_api_keys_never_reach_results_or_logs(tmp_path):
    secret = "wandb-secret-0123456789abcdef0123456789abcdef"
    env = {**os.environ, "RAGREPRO_RESULTS": str(tmp_path), "WANDB_API_KEY": secret,
           "WANDB_MODE": "disabled", "HF_TOKEN": "hf_" + secret}
    out = warm_cli.run(["experiment=core/smoke", "+wandb.api_key=" + secret], env=env,
                       cwd=REPO_ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert secret not in out.stdout + out.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="ignore"), path
