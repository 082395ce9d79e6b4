"""A real Ray head and a real one-node Slurm on 127.0.0.1, started for these tests and
always stopped again. Nothing here is skipped: without `make setup-cluster` they fail loudly."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from launcher_helpers import claim, free_port_pair, stale_folders
from ray_local import ray_head_running

from ragrepro.paths import REPO_ROOT


@pytest.fixture(scope="session")
def ray_head():
    """A Ray head for the whole session (ray_local.ray_head_running); yields its address."""
    with ray_head_running() as address:
        yield address


SLURM_SCRIPT = REPO_ROOT / "scripts" / "slurm_local.sh"


def _slurm_ctl(action: str, folder: str, port: int | None = None):
    env = {**os.environ, "RAGREPRO_SLURM_DIR": folder}
    if port is not None:
        env["RAGREPRO_SLURM_PORT"] = str(port)
    return subprocess.run([str(SLURM_SCRIPT), action], capture_output=True, text=True, env=env,
                          timeout=180, check=False)


@pytest.fixture(scope="session")
def slurm():
    """scripts/slurm_local.sh start/stop in a private folder and on private ports; yields
    SLURM_CONF. The script waits (bounded) for the node to be idle and, on stop, for the
    daemons to be gone."""
    for stale in stale_folders("rr-slurm-"):  # daemons of a session killed before teardown
        _slurm_ctl("stop", str(stale))
        shutil.rmtree(stale, ignore_errors=True)
    folder = tempfile.mkdtemp(prefix="rr-slurm-")
    claim(Path(folder))
    started = _slurm_ctl("start", folder, free_port_pair())
    try:
        assert started.returncode == 0, (
            f"one-node Slurm did not start (make setup-cluster installs it):\n"
            f"{started.stdout}\n{started.stderr}")
        yield Path(folder) / "slurm.conf"
    finally:
        _slurm_ctl("stop", folder)
        shutil.rmtree(folder, ignore_errors=True)
